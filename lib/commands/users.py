"""`ash users allow|show|notes`: who may talk to Ash, and what Ash keeps about them."""

from __future__ import annotations

import click

from lib.commands.common import open_db, settings_or_exit


@click.group()
def users() -> None:
    """Allowed users and their profiles."""


@users.command("allow")
@click.argument("entry")
def users_allow(entry: str) -> None:
    """Allow a Telegram user by numeric id or @username (effective at once, no restart)."""
    from lib.telegram.access import allow, normalize_entry

    if not normalize_entry(entry).lstrip("@-"):
        raise click.ClickException("give a numeric Telegram id (e.g. 123456789) or an @username")
    settings = settings_or_exit()
    conn = open_db(settings)
    try:
        key, added = allow(conn, entry)
    finally:
        conn.close()
    if key.startswith("@"):
        click.echo(f"allowed {key}: pinned to the numeric id of the first user who writes with that name")
    else:
        click.echo(f"allowed {key}" if added else f"{key} was already allowed")


@users.command("show")
@click.argument("user_id", required=False)
def users_show(user_id: str | None) -> None:
    """List allowed users, or show one user's profile."""
    from lib.memory.store import get_profile
    from lib.telegram.access import listing

    settings = settings_or_exit()
    conn = open_db(settings)
    try:
        if user_id is None:
            entries = listing(conn, settings)
            if settings.config.owner is not None:
                click.echo(f"owner: {settings.config.owner}")
            if not entries:
                click.echo("nobody else is allowed; add someone with `ash users allow ID`")
            for row in entries:
                pinned = f" -> {row['user_id']}" if row["entry"].startswith("@") and row["user_id"] else ""
                click.echo(f"{row['entry']}{pinned}  ({row['source']})")
            return
        profile = get_profile(conn, user_id)
    finally:
        conn.close()
    if profile is None:
        raise click.ClickException(f"no profile for user {user_id}: Ash has not talked to them yet")
    click.echo(f"user: {profile.user_id}")
    click.echo(f"username: {'@' + profile.username if profile.username else '-'}")
    click.echo(f"name: {profile.display_name or '-'}")
    click.echo(f"timezone: {profile.timezone or '-'}")
    click.echo("notes:")
    click.echo(profile.notes or "  (none)")


@users.command("notes")
@click.argument("user_id")
@click.argument("text", required=False)
def users_notes(user_id: str, text: str | None) -> None:
    """Show a user's profile notes, or replace them with TEXT ("-" reads TEXT from stdin)."""
    from lib.memory.store import get_profile, set_notes

    settings = settings_or_exit()
    conn = open_db(settings)
    try:
        if text is None:
            profile = get_profile(conn, user_id)
            click.echo(profile.notes if profile and profile.notes else "(no notes)")
            return
        if text == "-":
            text = click.get_text_stream("stdin").read()
        set_notes(conn, user_id, text.strip())
    finally:
        conn.close()
    click.echo(f"notes for {user_id} saved")
