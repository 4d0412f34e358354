"""The terminal's conversation: whose it is, one turn of the agent, and Telegram's slash commands.

Both faces of `ash chat` (the plain loop for pipes and the interactive prompt) talk through a
ChatSession, so a line means the same thing in each: a slash command from the Telegram REGISTRY,
answered by the same handler, or a message for the agent.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from lib.agent import Approvals, OutputSink, ToolWatcher, TurnInput, TurnResult
from lib.config import Settings
from lib.runtime import Runtime

# The CLI conversation is one chat of its own per user; it persists across runs until `/new`.
CLI_PROVIDER = "cli"
CLI_CHAT_ID = "cli"
# Without `owner` in the config, the terminal user is stored under this id.
LOCAL_USER_ID = "local"
EXIT_WORDS = {"exit", "quit", "/exit", "/quit"}
TERMINAL_HELP = (
    "In the terminal: exit or Ctrl-D leaves; Ctrl-C stops an answer; Up and Down recall earlier messages; "
    "Esc then Enter starts a new line."
)


def cli_user_id(settings: Settings) -> str:
    """The owner's id when configured, else the fixed local id."""
    owner = settings.config.owner
    return str(owner) if owner is not None else LOCAL_USER_ID


def cli_chat_id(settings: Settings, user_id: str) -> str:
    """The owner's terminal chat is "cli" (as before `--user` existed); another user's is their own,
    so talking as them never continues the owner's conversation."""
    return CLI_CHAT_ID if user_id == cli_user_id(settings) else f"{CLI_CHAT_ID}:{user_id}"


@dataclass(frozen=True)
class Button:
    """A choice a command offers (Telegram shows it as an inline button)."""

    label: str
    data: str


@dataclass(frozen=True)
class CommandAnswer:
    """What a slash command answered: Markdown text and the choices it offers, if any."""

    text: str
    buttons: tuple[Button, ...] = ()


class ChatSession:
    """One user's terminal conversation over a runtime (`close` releases it)."""

    def __init__(self, settings: Settings, user_id: str) -> None:
        from lib.db import Database

        self.settings = settings
        self.user_id = user_id
        self.chat_id = cli_chat_id(settings, user_id)
        self.runtime = Runtime(settings=settings, db=Database(settings.database_path))

    async def turn(
        self, text: str, sink: OutputSink, tool_watcher: ToolWatcher | None = None, approvals: Approvals | None = None
    ) -> TurnResult:
        """Answer `text` through the agent, streamed into `sink`; `approvals` asks y/N before a risky call."""
        from lib.agent import run_turn

        turn = TurnInput(provider=CLI_PROVIDER, chat_id=self.chat_id, user_id=self.user_id, text=text)
        return await run_turn(self.runtime, turn, sink, tool_watcher=tool_watcher, approvals=approvals)

    async def command(self, text: str) -> CommandAnswer | None:
        """Answer a slash command as Telegram would; None when `text` is not one (it goes to the agent)."""
        from lib.telegram.commands import COMMANDS, parse_command, run_command

        parsed = parse_command(text, None)
        if parsed is None or parsed[0] not in COMMANDS:
            return None
        name, args = parsed

        def answer():
            return run_command(
                self.runtime.db.conn(),
                self.settings,
                name=name,
                args=args,
                user_id=self.user_id,
                chat_id=self.chat_id,
                provider=CLI_PROVIDER,
                # Between prompts no answer is being written; Ctrl-C is what stops one.
                stop_running=lambda: False,
            )

        reply = await asyncio.to_thread(answer)
        if reply is None:
            return None
        text = f"{reply.text}\n\n{TERMINAL_HELP}" if name == "help" else reply.text
        rows = reply.keyboard.inline_keyboard if reply.keyboard else []
        buttons = tuple(Button(b.text, b.callback_data or "") for row in rows for b in row)
        return CommandAnswer(text, buttons)

    async def press(self, button: Button) -> str:
        """Act on a chosen button as Telegram does on a press; the text to show for it."""
        from lib.telegram.commands import run_callback

        toast, text = await asyncio.to_thread(
            lambda: run_callback(
                self.runtime.db.conn(),
                self.settings,
                data=button.data,
                user_id=self.user_id,
                chat_id=self.chat_id,
                provider=CLI_PROVIDER,
            )
        )
        return text or toast

    async def close(self) -> None:
        """Close the model clients, the HTTP client and the database."""
        await self.runtime.close_llm_providers()
        await self.runtime.close_http()
        self.runtime.db.close()
