"""`ash chat [MESSAGE]`: talk to Ash from the terminal through the same pipeline as Telegram.

In a terminal it is an interactive prompt (lib/commands/chat_repl.py); with a MESSAGE, or with
stdin or stdout not a terminal (`echo hi | ash chat`), it reads lines and prints plain text.
"""

from __future__ import annotations

import asyncio
import sys

import click

from lib.commands.chat_session import EXIT_WORDS, ChatSession, cli_user_id
from lib.commands.common import open_db, settings_or_exit, user_option
from lib.config import Settings
from lib.conversation.replies import Reply

# Lines typed at the interactive prompt, kept in ASH_HOME for Up and Ctrl-R across runs.
HISTORY_FILE = "chat_history"


async def _plain_line(session: ChatSession, line: str, answer_prefix: str = "") -> bool:
    """Answer one line as plain text: a slash command, or a turn streamed to stdout after `answer_prefix`."""
    from lib.commands.chat_sink import CliSink

    answer = await session.command(line)
    if answer is None:
        click.echo(answer_prefix, nl=False)
        sink = CliSink()
        return (await session.turn(line, sink, tool_watcher=sink, approvals=sink)).ok
    click.echo(answer.text)
    if answer.choices:
        await _plain_choice(session, answer)
    return True


def ask(prompt: str) -> str:
    """The next input line. The prompt is for someone typing at a terminal: it goes to stderr, and
    only then, so `ash chat < questions.txt > answers.txt` gets answers and nothing else."""
    if sys.stdin.isatty():
        click.echo(prompt, nl=False, err=True)
    return input()


async def _plain_choice(session: ChatSession, answer: Reply) -> None:
    """Offer a command's buttons as numbered choices read from the next input line."""
    for number, button in enumerate(answer.choices, 1):
        click.echo(f"  {number}. {button.label}")
    try:
        choice = ask(f"choose 1-{len(answer.choices)}> ").strip()
    except EOFError:
        choice = ""
    if choice.isdigit() and 1 <= int(choice) <= len(answer.choices):
        click.echo(await session.press(answer.choices[int(choice) - 1]))
    else:
        click.echo("Nothing chosen, nothing done.")


async def _plain_loop(session: ChatSession) -> None:
    """Read lines until end of input or an exit word, answering each."""
    while True:
        try:
            line = ask("you> ").strip()
        except EOFError:
            if sys.stdin.isatty():
                click.echo(err=True)  # end the prompt's line
            return
        if line in EXIT_WORDS:
            return
        if line:
            await _plain_line(session, line, answer_prefix="ash> " if sys.stdout.isatty() else "")


async def _session(settings: Settings, user_id: str, message: str | None, interactive: bool) -> bool:
    session = ChatSession(settings, user_id)
    try:
        if message is not None:
            return await _plain_line(session, message)
        if interactive:
            from lib.commands.chat_repl import run_repl

            await run_repl(session, settings.home / HISTORY_FILE)
        else:
            await _plain_loop(session)
        return True
    finally:
        await session.close()


@click.command()
@click.argument("message", required=False)
@user_option("Talk as this Telegram user id: their memory, profile and time zone (default: the owner).")
def chat(message: str | None, user_id: str | None) -> None:
    """Talk to Ash: answer MESSAGE, or start a conversation without one.

    In a terminal you get line editing, history (Up, Ctrl-R), multi-line paste, answers rendered
    as Markdown and a line for each tool run; Telegram's slash commands (/help, /new, /memory,
    /timezone, ...) work the same here. Piped input is read line by line as plain text. The
    conversation persists across runs (provider "cli"); /new starts afresh. Uses the same prompt,
    memory, tools and models as Telegram.
    """
    from lib.errors import LLMNotConfigured
    from lib.llm.router import candidates

    settings = settings_or_exit()
    try:
        candidates(settings)
    except LLMNotConfigured as exc:
        raise click.ClickException(exc.message) from None
    open_db(settings, create=True).close()
    interactive = message is None and sys.stdin.isatty() and sys.stdout.isatty()
    try:
        ok = asyncio.run(_session(settings, user_id or cli_user_id(settings), message, interactive))
    except KeyboardInterrupt:
        click.echo()
        return
    finally:
        if settings.config.mcp.servers:
            from lib.tools.mcp_client import close_sessions

            close_sessions()  # outside MCP servers' processes end with the chat
    if not ok:
        raise SystemExit(1)
