"""`ash sessions list|search|export`: conversations and their messages."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import click

from lib.commands.common import open_db, resolve_user, settings_or_exit, user_option
from lib.db import write_private_text


@click.group()
def sessions() -> None:
    """Conversations and their messages."""


@sessions.command("list")
@user_option("Only sessions this user started or wrote in.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=20, show_default=True, help="Most sessions listed.")
def sessions_list(user_id: str | None, limit: int) -> None:
    """List sessions, most recently active first."""
    from lib.memory import browse

    conn = open_db(settings_or_exit())
    found = browse.sessions(conn, user_id=user_id, limit=limit)
    for s in found:
        state = "closed" if s["closed_at"] else "open"
        click.echo(
            f"#{s['id']} {s['updated_at'][:16].replace('T', ' ')} {s['provider']}:{s['chat_id']} "
            f"({s['chat_type']}, user {s['user_id']}) {s['message_count']} messages, {state}"
        )
    if not found:
        click.echo("no sessions")


@sessions.command("search")
@click.argument("query")
@user_option()
@click.option("--limit", type=click.IntRange(1, 100), default=10, show_default=True, help="Most messages shown.")
def sessions_search(query: str, user_id: str | None, limit: int) -> None:
    """Search a user's past messages (hybrid: words and meaning)."""
    from lib.memory.api import search_messages

    settings = settings_or_exit()
    conn = open_db(settings)
    user = resolve_user(settings, user_id)
    results = search_messages(conn, settings, user_id=user, query=query, limit=limit)
    for r in results:
        when = str(r.metadata.get("created_at", ""))[:16].replace("T", " ")
        click.echo(f"{r.score:.3f} message #{r.id} {when}  {r.content}")
    if not results:
        click.echo("nothing found")


@sessions.command("export")
@user_option("Only this user's data (default: everyone's).")
@click.option("--session", "session_id", type=int, default=None, help="Only this session and its messages.")
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None, help="File (default: stdout)."
)
def sessions_export(user_id: str | None, session_id: int | None, output: Path | None) -> None:
    """Export sessions and messages (with profiles and knowledge) as JSON."""
    from lib.memory import browse

    conn = open_db(settings_or_exit())
    if session_id is not None:
        found = browse.session(conn, session_id)
        if found is None:
            raise click.ClickException(f"no session #{session_id}; see `ash sessions list`")
        messages = browse.session_messages(conn, session_id, limit=10_000_000)
        data = {"session": found, "messages": [dataclasses.asdict(m) for m in messages]}
    else:
        data = browse.export(conn, user_id)
    text = json.dumps(data, ensure_ascii=False, indent=2)
    if output is None:
        click.echo(text)
    else:
        write_private_text(output, text + "\n")
        click.echo(f"wrote {output}", err=True)
