"""The interactive `ash chat`: a prompt with line editing, history and multi-line paste
(prompt_toolkit), Telegram's slash commands, and answers rendered as they stream (Rich)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Iterator
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import WordCompleter
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings
from rich.console import Console
from rich.text import Text

from lib.commands.chat_live import ChatMarkdown, TerminalSink
from lib.commands.chat_session import EXIT_WORDS, ChatSession
from lib.conversation.replies import Reply

PROMPT = "you> "
GREETING = "Talking to Ash as user {user}. /help lists the commands; exit or Ctrl-D leaves."


def _key_bindings() -> KeyBindings:
    bindings = KeyBindings()

    # Enter sends; Esc then Enter (or Alt-Enter) starts a new line. A pasted block keeps its
    # newlines anyway: terminals mark a paste (bracketed paste) and prompt_toolkit inserts it whole.
    @bindings.add("escape", "enter")
    def _newline(event) -> None:
        event.current_buffer.insert_text("\n")

    return bindings


def _command_completer() -> WordCompleter:
    from lib.conversation.commands import REGISTRY

    # sentence=True matches the whole line typed so far, "/" included, so only commands complete.
    return WordCompleter([f"/{command.name}" for command in REGISTRY], sentence=True)


def _history(path: Path) -> FileHistory:
    # What was typed may be private: the file is the user's alone, like the database beside it.
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600, exist_ok=True)
    return FileHistory(str(path))


async def run_repl(session: ChatSession, history_path: Path) -> None:
    """Prompt, answer, repeat, until an exit word or Ctrl-D (Ctrl-C clears the line or stops an answer)."""
    console = Console(highlight=False)
    prompt: PromptSession[str] = PromptSession(
        history=_history(history_path), completer=_command_completer(), key_bindings=_key_bindings()
    )
    console.print(Text(GREETING.format(user=session.user_id), style="dim"))
    while True:
        try:
            line = (await prompt.prompt_async(PROMPT)).strip()
        except KeyboardInterrupt:
            continue
        except EOFError:
            return
        if line in EXIT_WORDS:
            return
        if not line:
            continue
        answer = await session.command(line)
        if answer is None:
            await _answer(console, session, line)
        else:
            console.print(ChatMarkdown(answer.text))
            if answer.choices:
                await _choose(console, session, answer)


async def _answer(console: Console, session: ChatSession, line: str) -> None:
    """One turn of the agent; Ctrl-C while it runs stops it (as /stop does in Telegram) and keeps the chat."""
    sink = TerminalSink(console)
    turn = asyncio.ensure_future(session.turn(line, sink, tool_watcher=sink, approvals=sink))
    try:
        with _sigint_cancels(turn):
            await asyncio.wait([turn])
    finally:
        turn.cancel()
    if turn.cancelled():
        sink.halt()
    else:
        turn.result()


@contextlib.contextmanager
def _sigint_cancels(task: asyncio.Future) -> Iterator[None]:
    """While the block runs, Ctrl-C cancels `task` instead of ending the program."""
    loop = asyncio.get_running_loop()
    previous = signal.getsignal(signal.SIGINT)
    loop.add_signal_handler(signal.SIGINT, task.cancel)
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        signal.signal(signal.SIGINT, previous)


async def _choose(console: Console, session: ChatSession, answer: Reply) -> None:
    """Offer a command's buttons (Telegram's inline keyboard) as numbered choices."""
    for number, button in enumerate(answer.choices, 1):
        console.print(f"  {number}. {button.label}", markup=False)
    choices = [str(n) for n in range(1, len(answer.choices) + 1)]
    try:
        choice = (await PromptSession().prompt_async(f"choose {choices[0]}-{choices[-1]}> ")).strip()
    except (KeyboardInterrupt, EOFError):
        choice = ""
    if choice in choices:
        console.print(ChatMarkdown(await session.press(answer.choices[int(choice) - 1])))
    else:
        console.print(Text("Nothing chosen, nothing done.", style="dim"))
