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


def user_option(help_text: str = "Telegram user id (default: the configured owner).") -> click.Option:
    """The shared `--user ID` option."""
    return click.option("--user", "user_id", type=str, default=None, help=help_text)


def resolve_user(settings: Settings, user_id: str | None) -> str:
    """The given user id, else the owner's, else a clear error."""
    if user_id:
        return user_id
    if settings.config.owner is None:
        raise click.ClickException("no --user given and no `owner` set in the config file; pass --user ID")
    return str(settings.config.owner)
