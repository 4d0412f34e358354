"""`ash backup PATH` and `ash restore PATH`."""

from __future__ import annotations

from pathlib import Path

import click

from lib.commands.common import settings_or_exit


@click.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--force", is_flag=True, help="Overwrite PATH if it exists.")
def backup(path: Path, force: bool) -> None:
    """Write a consistent snapshot of the database to PATH (a directory gets ash-<time>.db inside).

    Safe while the server runs: it uses SQLite's online backup API.
    """
    from lib.backup import BackupError, backup_to

    settings = settings_or_exit()
    try:
        written = backup_to(settings.database_path, path, overwrite=force)
    except BackupError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"backed up {settings.database_path} to {written} ({written.stat().st_size} bytes)")


@click.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def restore(path: Path, yes: bool) -> None:
    """Replace the database with the backup at PATH (stop the server first).

    The file is checked first; the current database is kept as <db>.pre-restore-<time>.bak and
    the restored one is migrated to this version of Ash.
    """
    from lib.backup import BackupError, check_ash_database, restore_from

    settings = settings_or_exit()
    try:
        check_ash_database(path)
    except BackupError as exc:
        raise click.ClickException(str(exc)) from None
    if not yes:
        click.confirm(f"Replace {settings.database_path} with {path}?", abort=True)
    try:
        result = restore_from(path, settings.database_path)
    except BackupError as exc:
        raise click.ClickException(str(exc)) from None
    if result.previous_copy:
        click.echo(f"previous database kept at {result.previous_copy}")
    if result.applied_migrations:
        click.echo(f"migrated: {', '.join(result.applied_migrations)}")
    click.echo(f"restored {settings.database_path} from {path}")
