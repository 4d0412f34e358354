"""Helpers every command uses: settings and a migrated database, with errors a user can act on."""

from __future__ import annotations

import apsw
import click

from lib.config import Settings, load_settings
from lib.db import connect
from lib.errors import AshError


def settings_or_exit() -> Settings:
    """Load the configuration or stop with the reason."""
    try:
        return load_settings()
    except AshError as exc:
        raise click.ClickException(str(exc)) from None


def open_db(settings: Settings, *, migrate_first: bool = True) -> apsw.Connection:
    """Open the configured database, applying pending migrations first."""
    from lib.migrations import migrate

    try:
        conn = connect(settings.database_path)
        if migrate_first:
            migrate(conn, settings.database_path)
    except AshError as exc:
        raise click.ClickException(str(exc)) from None
    return conn


class TelegramUserId(click.ParamType):
    """A person's numeric Telegram id, checked the way `ash users allow` checks it: `--user abc`
    or a group's negative id is refused with the reason, by every command alike."""

    name = "ID"

    def convert(self, value, param, ctx) -> str:
        from lib.telegram.access import USER_ID_MAX

        text = str(value).strip()
        if text.isascii() and text.isdigit() and 1 <= int(text) <= USER_ID_MAX:
            return str(int(text))
        if text.startswith("-") and text[1:].isdigit():
            self.fail(f"{text} is a group or channel id; a person's id is a positive number", param, ctx)
        self.fail(f"{text!r} is not a Telegram user id (a whole number like 123456789)", param, ctx)


USER_ID = TelegramUserId()


def user_option(help_text: str = "Telegram user id (default: the configured owner).", **kwargs) -> click.Option:
    """The shared `--user ID` option, checked as a Telegram user id."""
    return click.option("--user", "user_id", type=USER_ID, default=None, help=help_text, **kwargs)


def webhook_url(text: str) -> str | None:
    """An https URL for Telegram to deliver to (blank: none); a bare origin gets the webhook's path,
    as `ash init` and `ash webhook set` both take it."""
    from urllib.parse import urlsplit

    from lib.telegram.relay import WEBHOOK_PATH

    url = text.strip()
    if not url:
        return None
    if not url.startswith("https://"):
        raise click.BadParameter(
            f"Telegram delivers only to https:// URLs, got {url!r} (no public URL? leave it out and run `ash relay`)"
        )
    return url.rstrip("/") + WEBHOOK_PATH if urlsplit(url).path in ("", "/") else url


def resolve_user(settings: Settings, user_id: str | None) -> str:
    """The given user id, else the owner's, else a clear error."""
    if user_id:
        return user_id
    if settings.config.owner is None:
        raise click.ClickException("no --user given and no `owner` set in the config file; pass --user ID")
    return str(settings.config.owner)
