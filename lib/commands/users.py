"""`ash users allow|deny|show|notes|timezone|followups`: who may talk to Ash, and what Ash keeps about them."""

from __future__ import annotations

import click

from lib.commands.common import USER_ID, open_db, settings_or_exit
from lib.errors import InvalidUserEntry, OwnerProtected


@click.group()
def users() -> None:
    """Who may talk to Ash (allow, deny) and what Ash keeps about them."""


def _entry(entry: str) -> str:
    """The id or @username as Telegram defines them, or a message saying what is wrong."""
    from lib.config.people import parse_entry

    try:
        return parse_entry(entry)
    except InvalidUserEntry as exc:
        raise click.ClickException(str(exc)) from None


# A group's id is negative: without this, click would read `-100123` as an unknown option.
ENTRY = {"context_settings": {"ignore_unknown_options": True}}


@users.command("allow", **ENTRY)
@click.argument("entry")
def users_allow(entry: str) -> None:
    """Allow a Telegram user by numeric id or @username (effective at once, no restart)."""
    from lib.conversation.access import allow

    key = _entry(entry)
    settings = settings_or_exit()
    conn = open_db(settings, create=True)
    try:
        done = allow(conn, key)
    finally:
        conn.close()
    if done.lifted:
        click.echo(f"allowed {done.entry} again: their denial is lifted")
    elif done.entry.startswith("@"):
        click.echo(f"allowed {done.entry}: pinned to the numeric id of the first user who writes with that name")
    else:
        click.echo(f"allowed {done.entry}" if done.added else f"{done.entry} was already allowed")


@users.command("deny", **ENTRY)
@click.argument("entry")
def users_deny(entry: str) -> None:
    """Take access away from a user by numeric id or @username; what Ash knows about them is kept,
    the tasks they scheduled are removed and their MCP tokens revoked.

    The denial wins over config.toml's allowed_users until `ash users allow` lets them in again.
    The owner cannot be denied."""
    from lib.conversation.access import deny

    key = _entry(entry)
    settings = settings_or_exit()
    conn = open_db(settings, create=True)
    try:
        done = deny(conn, settings, key)
    except OwnerProtected as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        conn.close()
    pinned = f" (user {done.user_id})" if done.user_id and done.user_id != done.entry else ""
    click.echo(f"denied {done.entry}{pinned}: Ash no longer answers them; their data is kept")
    if done.schedules_removed:
        click.echo(f"removed the {done.schedules_removed} scheduled task(s) they had made")
    if done.mcp_tokens_revoked:
        click.echo(f"revoked their {done.mcp_tokens_revoked} MCP token(s)")
    if done.in_config:
        click.echo("config.toml still lists them in allowed_users; the denial wins until you allow them again")


@users.command("show")
@click.argument("user_id", required=False, type=USER_ID)
def users_show(user_id: str | None) -> None:
    """List allowed users, or show one user's profile."""
    from lib.conversation.access import denials, listing
    from lib.memory.store import get_profile

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
            for row in denials(conn):
                pinned = f" -> {row['user_id']}" if row["entry"].startswith("@") and row["user_id"] else ""
                click.echo(f"{row['entry']}{pinned}  (denied since {row['denied_at'][:10]})")
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


@users.command("list")
@click.pass_context
def users_list(ctx: click.Context) -> None:
    """List the owner, allowed and denied users (the same as `ash users show` without an id)."""
    ctx.invoke(users_show, user_id=None)


@users.command("notes")
@click.argument("user_id")
@click.argument("text", required=False)
def users_notes(user_id: str, text: str | None) -> None:
    """Show a user's profile notes, or replace them with TEXT ("-" reads TEXT from stdin)."""
    from lib.memory.store import get_profile, set_notes

    settings = settings_or_exit()
    conn = open_db(settings, create=text is not None)
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


@users.command("timezone")
@click.argument("user_id", type=USER_ID)
@click.argument("zone")
def users_timezone(user_id: str, zone: str) -> None:
    """Set the time zone (an IANA name such as Europe/Berlin) a user's dates are shown in."""
    from lib.memory.store import set_timezone

    settings = settings_or_exit()
    conn = open_db(settings, create=True)
    try:
        set_timezone(conn, user_id, zone)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        conn.close()
    click.echo(f"time zone of {user_id} set to {zone}")


@users.command("followups", **ENTRY)
@click.argument("chat_id")
@click.argument("state", type=click.Choice(["on", "off"]), required=False)
def users_followups(chat_id: str, state: str | None) -> None:
    """Turn Ash's follow-ups on or off for a user (their private chat) or a group (its negative
    id); without on or off, say whether they are on. Off cancels the follow-ups waiting there."""
    import time

    from lib.schedule import followups

    if not chat_id.lstrip("-").isdigit():
        raise click.ClickException(f"{chat_id!r} is not a numeric Telegram id (a user's, or a group's negative one).")
    settings = settings_or_exit()
    conn = open_db(settings, create=True)
    try:
        if state is None:
            click.echo(f"follow-ups for {chat_id} are {'on' if followups.enabled(conn, chat_id) else 'off'}")
            return
        cancelled = followups.set_enabled(conn, chat_id, state == "on", "cli", time.time())
    finally:
        conn.close()
    dropped = f"; {cancelled} waiting follow-up(s) cancelled" if cancelled else ""
    click.echo(f"follow-ups for {chat_id} turned {state}{dropped}")
