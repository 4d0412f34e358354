"""`ash chat [MESSAGE]`: talk to Ash from the terminal through the same pipeline as Telegram."""

from __future__ import annotations

import asyncio

import click

from lib.commands.common import open_db, settings_or_exit
from lib.config import Settings

# The CLI conversation is one chat of its own; it persists across runs until `/new`.
CLI_PROVIDER = "cli"
CLI_CHAT_ID = "cli"
# Without `owner` in the config, the terminal user is stored under this id.
LOCAL_USER_ID = "local"
EXIT_WORDS = {"exit", "quit", "/exit", "/quit"}


def cli_user_id(settings: Settings) -> str:
    """The owner's id when configured, else the fixed local id."""
    owner = settings.config.owner
    return str(owner) if owner is not None else LOCAL_USER_ID


async def _session(settings: Settings, message: str | None) -> bool:
    from lib.agent.contract import TurnInput
    from lib.agent.turn import run_turn
    from lib.commands.chat_sink import CliSink
    from lib.db import Database
    from lib.runtime import Runtime

    runtime = Runtime(settings=settings, db=Database(settings.database_path))
    user_id = cli_user_id(settings)

    async def one(text: str) -> bool:
        turn = TurnInput(provider=CLI_PROVIDER, chat_id=CLI_CHAT_ID, user_id=user_id, text=text)
        result = await run_turn(runtime, turn, CliSink())
        return result.ok

    try:
        if message is not None:
            return await one(message)
        click.echo("Talking to Ash as the owner. /new starts a new conversation; exit or Ctrl-D leaves.")
        while True:
            try:
                line = input("you> ").strip()
            except EOFError:
                click.echo()
                return True
            if line in EXIT_WORDS:
                return True
            if line == "/new":
                from lib.memory.store import close_session

                await asyncio.to_thread(lambda: close_session(runtime.db.conn(), CLI_PROVIDER, CLI_CHAT_ID))
                click.echo("Started a new conversation.")
                continue
            if line:
                click.echo("ash> ", nl=False)
                await one(line)
    finally:
        await runtime.close_llm_providers()
        await runtime.close_http()
        runtime.db.close()


@click.command()
@click.argument("message", required=False)
def chat(message: str | None) -> None:
    """Talk to Ash as the owner: answer MESSAGE, or start an interactive loop without one.

    The conversation persists across runs (provider "cli", chat "cli"); type /new in the
    loop to start afresh. Uses the same prompt, memory, tools and models as Telegram.
    """
    from lib.errors import LLMNotConfigured
    from lib.llm.router import candidates

    settings = settings_or_exit()
    try:
        candidates(settings)
    except LLMNotConfigured as exc:
        raise click.ClickException(exc.message) from None
    open_db(settings).close()
    try:
        ok = asyncio.run(_session(settings, message))
    except KeyboardInterrupt:
        click.echo()
        return
    if not ok:
        raise SystemExit(1)
