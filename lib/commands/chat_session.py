"""The terminal's conversation: whose it is, one turn of the agent, and the slash commands.

`ash chat` is the conversation's second channel (lib/conversation/): both its faces (the plain
loop for pipes and the interactive prompt) talk through a ChatSession, so a line means the same
thing in each and in Telegram: a slash command from the REGISTRY, answered by the same handler,
the correction /why's Wrong asked for, or a message for the agent. Buttons become numbered
choices.
"""

from __future__ import annotations

import asyncio
import time

from lib.agent import Approvals, OutputSink, ToolWatcher, TurnInput, TurnResult
from lib.config import Settings
from lib.conversation.replies import Asker, Button, Reply
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
        await asyncio.to_thread(self.notice, text)
        return await run_turn(self.runtime, turn, sink, tool_watcher=tool_watcher, approvals=approvals)

    def notice(self, text: str) -> None:
        """Read the message for follow-ups (lib/schedule/followups.py): they are delivered, and
        turned on, in the person's private Telegram chat; a terminal user with no Telegram id has none."""
        from lib.errors import ScheduleError
        from lib.schedule import followups, store

        try:
            chat = store.telegram_chat(CLI_PROVIDER, self.chat_id, self.user_id)
        except ScheduleError:
            return
        where = followups.Where(self.user_id, chat)
        followups.on_message(self.runtime.db.conn(), self.settings, where, text, time.time())

    @property
    def asker(self) -> Asker:
        """The terminal's user, in their terminal chat."""
        return Asker(CLI_PROVIDER, self.chat_id, self.user_id)

    async def command(self, text: str) -> Reply | None:
        """Answer a slash command as Telegram would, or the correction /why's Wrong asked for;
        None when `text` is neither (it goes to the agent)."""
        from lib.conversation.commands import BY_NAME, Ask, parse_command, run_command
        from lib.conversation.why import correction_reply

        parsed = parse_command(text, None)
        conn, settings = self.runtime.db.conn, self.settings
        if parsed is None or parsed[0] not in BY_NAME:
            corrected = await asyncio.to_thread(lambda: correction_reply(conn(), settings, self.asker, text))
            return corrected
        name, args = parsed
        # Between prompts no answer is being written (Ctrl-C is what stops one): /stop has nothing to stop.
        reply = await asyncio.to_thread(lambda: run_command(Ask(conn(), settings, self.asker, args), name))
        return Reply(f"{reply.text}\n\n{TERMINAL_HELP}") if name == "help" else reply

    async def press(self, button: Button) -> str:
        """Act on a chosen button as Telegram does on a press; the text to show for it."""
        from lib.conversation.commands import run_press

        done = await asyncio.to_thread(
            lambda: run_press(self.runtime.db.conn(), self.settings, self.asker, button.data)
        )
        shown = done.message or done.reply
        return shown.text if shown is not None else done.notice

    async def close(self) -> None:
        """Close the model clients, the HTTP client and the database."""
        await self.runtime.close_llm_providers()
        await self.runtime.close_http()
        self.runtime.db.close()
