"""`ash db migrate|status`."""

from __future__ import annotations

import click

from lib.commands.common import open_db, settings_or_exit


@click.group()
def db() -> None:
    """Database migrations."""


@db.command("migrate")
def db_migrate() -> None:
    """Apply pending migrations (a backup copy is taken first if the database has data)."""
    from lib.migrations import migrate

    settings = settings_or_exit()
    conn = open_db(settings, migrate_first=False, create=True)
    try:
        applied = migrate(conn, settings.database_path)
    except Exception as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        conn.close()
    click.echo(f"applied: {', '.join(applied)}" if applied else "database is up to date")


@db.command("status")
def db_status() -> None:
    """Show applied and pending migrations (reads only: a missing database is not created)."""
    from lib.migrations import STEPS, Status, status

    settings = settings_or_exit()
    if settings.database_path.exists():
        conn = open_db(settings, migrate_first=False)
        state = status(conn)
        conn.close()
        click.echo(f"database: {settings.database_path}")
    else:
        state = Status(applied=[], pending=[step.name for step in STEPS], unknown=[])
        click.echo(f"database: {settings.database_path} (does not exist yet; `ash db migrate` creates it)")
    for name in state.applied:
        click.echo(f"  applied  {name}")
    for name in state.pending:
        click.echo(f"  pending  {name}")
    for name in state.unknown:
        click.echo(f"  unknown  {name} (from a newer Ash)")
    if state.pending:
        click.echo("run `ash db migrate` to apply the pending steps")
