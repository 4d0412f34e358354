"""`ash schedule list|add|cancel`: reminders and scheduled tasks from the terminal.

Tasks made here are the same as those the `schedule` tool makes: owned by a person (`--user`,
default the owner), written to a Telegram chat (`--chat`, default that person's private chat),
their times read in that person's zone unless `--zone` names another. A running server picks
a new task up at its next tick (`[server] tick_interval`), then arms its timer for it.
"""

from __future__ import annotations

import time

import click

from lib.commands.common import open_db, resolve_user, settings_or_exit, user_option


@click.group()
def schedule() -> None:
    """Reminders and scheduled tasks: list, add, cancel."""


@schedule.command("list")
@user_option("Only the tasks this Telegram user made.")
@click.option("--chat", "chat_id", default=None, help="Only the tasks of this Telegram chat id.")
@click.option("--all", "everything", is_flag=True, help="Include finished and cancelled tasks.")
def schedule_list(user_id: str | None, chat_id: str | None, everything: bool) -> None:
    """List tasks (everyone's, active ones), the next to run first."""
    from lib.schedule import describe, store

    settings = settings_or_exit()
    conn = open_db(settings)
    try:
        jobs = store.listing(conn, user_id=user_id, chat_id=chat_id, everything=everything, limit=10_000)
    finally:
        conn.close()
    for job in jobs:
        outcome = f" [last run: {job.last_outcome}]" if job.last_outcome else ""
        click.echo(f"{describe.line(job)}  (user {job.user_id}, chat {job.chat_id}){outcome}")
    if not jobs:
        click.echo("no scheduled tasks" if everything else "no active scheduled tasks (--all shows finished ones)")


def _must_be_allowed(conn, settings, user: str) -> None:
    """Refuse a task for someone who may not talk to Ash: it would be skipped at every run."""
    from lib.conversation.access import still_allowed

    if not still_allowed(conn, settings, user):
        raise click.ClickException(
            f"user {user} may not talk to Ash, so a task of theirs would never run; "
            f"allow them first (`ash users allow {user}`), or check the id (`ash users list`)"
        )


@schedule.command("add")
@click.argument("text")
@click.option("--at", "at", default=None, help="One time: 'in 20 minutes', 'tomorrow at 9', 2026-05-01T09:00.")
@click.option("--every", default=None, help="Repeat interval, e.g. '15 minutes' (--at sets the first run).")
@click.option("--cron", default=None, help="Five-field cron expression, e.g. '0 8 * * *'.")
@click.option("--zone", default=None, help="IANA time zone of the times (default: the user's, else config's).")
@click.option("--prompt", "is_prompt", is_flag=True, help="Run TEXT as a request to Ash instead of sending it.")
@user_option("Telegram user id the task belongs to (default: the configured owner).")
@click.option("--chat", "chat_id", default=None, help="Telegram chat id to write to (default: the user's own).")
@click.option("--topic", type=int, default=None, help="Forum topic (message_thread_id) in that chat.")
@click.option("--count", type=click.IntRange(1), default=None, help="Stop after this many runs.")
@click.option("--until", default=None, help="Stop after this time.")
def schedule_add(
    text: str,
    at: str | None,
    every: str | None,
    cron: str | None,
    zone: str | None,
    is_prompt: bool,
    user_id: str | None,
    chat_id: str | None,
    topic: int | None,
    count: int | None,
    until: str | None,
) -> None:
    """Schedule TEXT: sent as a message, or with --prompt run as a request to Ash."""
    from lib.errors import ScheduleError
    from lib.schedule import describe, store
    from lib.schedule.times import parse_at, parse_timing
    from lib.schedule.times import zone as zone_named

    settings = settings_or_exit()
    user = resolve_user(settings, user_id)
    conn = open_db(settings, create=True)
    try:
        _must_be_allowed(conn, settings, user)
        now = time.time()
        tz = zone_named(zone) if zone else store.zone_for(conn, settings, user)
        chat = chat_id or user
        draft = store.Draft(
            user_id=user,
            chat_id=chat,
            chat_type=store.chat_type(conn, chat),
            message_thread_id=topic,
            timing=parse_timing(at=at, every=every, cron=cron, tz=tz, now=now),
            action=store.PROMPT if is_prompt else store.MESSAGE,
            text=text,
            max_runs=count,
            ends_at=parse_at(until, tz, now) if until else None,
        )
        job = store.create(conn, settings, draft, now)
    except ScheduleError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        conn.close()
    click.echo(f"scheduled {describe.line(job)}  (user {job.user_id}, chat {job.chat_id})")
    tick = settings.config.server.tick_interval
    click.echo(f"a running server picks it up within [server] tick_interval ({tick:g} s)")


@schedule.command("cancel")
@click.argument("schedule_id", type=int)
def schedule_cancel(schedule_id: int) -> None:
    """Cancel a task by its id (`ash schedule list` shows them)."""
    from lib.schedule import describe, store

    settings = settings_or_exit()
    conn = open_db(settings)
    try:
        job = store.cancel(conn, schedule_id, "cli", time.time())
    finally:
        conn.close()
    if job is None:
        raise click.ClickException(f"there is no active scheduled task #{schedule_id} (`ash schedule list --all`)")
    click.echo(f"cancelled #{job.id}, which {describe.what(job)}")
