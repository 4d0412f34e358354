"""Helpers every command uses: settings and a migrated database, with errors a user can act on."""

from __future__ import annotations

import apsw
import click

from lib.config import Settings, load_settings
from lib.db import connect
from lib.errors import AshError, InvalidUserEntry


def settings_or_exit() -> Settings:
    """Load the configuration or stop with the reason."""
    try:
        return load_settings()
    except AshError as exc:
        raise click.ClickException(str(exc)) from None


def home_named(settings: Settings) -> str:
    """Which home a command uses, and why, for a message."""
    if settings.home_from == "ASH_HOME":
        return f"{settings.home} (from ASH_HOME)"
    return f"{settings.home} (the default; set ASH_HOME to use another)"


def open_db(settings: Settings, *, migrate_first: bool = True, create: bool = False) -> apsw.Connection:
    """Open the configured database, applying pending migrations first.

    Only a command that stores what it was asked to (`create`) makes a new database, and it says
    where; any other stops with where it looked: `ash users show` run with another home used to
    create a blank database there and answer from it as if Ash had never been set up."""
    from lib.migrations import migrate

    path = settings.database_path
    if not path.is_file():
        if not create:
            raise click.ClickException(
                f"no Ash database at {path}: the home is {home_named(settings)}. Set ASH_HOME to the folder "
                "that holds your ash.db (and config.toml), or run `ash init` to set Ash up here"
            )
        click.echo(f"ash: new database at {path}; home {home_named(settings)}", err=True)
    try:
        conn = connect(path)
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
        from lib.config.people import parse_user_id

        try:
            return parse_user_id(value)
        except InvalidUserEntry as exc:
            self.fail(str(exc), param, ctx)


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
