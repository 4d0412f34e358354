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
@click.argument("path", type=click.Path(path_type=Path), required=False)
@click.option("--from-replica", is_flag=True, help="Restore from the Litestream replica (ASH_REPLICA_URL).")
@click.option(
    "--timestamp", default=None, help="With --from-replica: the point in time, RFC 3339 (2026-05-01T12:00:00Z)."
)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def restore(path: Path | None, from_replica: bool, timestamp: str | None, yes: bool) -> None:
    """Replace the database with the backup at PATH, or with the replica (--from-replica).

    Works while the server runs: then the restore goes through it (POST /admin/restore, with
    ASH_ADMIN_TOKEN), which holds webhooks (Telegram retries them) and pauses turns meanwhile.
    The file is checked first (its schema must be exactly Ash's); the current database is kept as
    <db>.pre-restore-<time>.bak; unanswered updates and forgets made since are carried over.
    """
    from lib.backup import BackupError, check_ash_database

    if (path is None) == (not from_replica):
        raise click.ClickException("give a backup PATH or --from-replica (not both)")
    if timestamp and not from_replica:
        raise click.ClickException("--timestamp needs --from-replica")
    settings = settings_or_exit()
    if path is not None:
        path = path.resolve()
        try:
            check_ash_database(path)
        except BackupError as exc:
            raise click.ClickException(str(exc)) from None
    source = f"the replica{f' at {timestamp}' if timestamp else ''}" if from_replica else str(path)
    if not yes:
        click.confirm(f"Replace {settings.database_path} with {source}?", abort=True)
    server = _running_server(settings)
    if server is not None:
        answer = _restore_through(server, settings, path, timestamp)
        previous, migrated, carried = answer["previous_copy"], answer["migrated"], answer["carried"]
    else:
        previous, migrated, carried = _restore_here(settings, path, timestamp)
    if previous:
        click.echo(f"previous database kept at {previous}")
    if migrated:
        click.echo(f"migrated: {', '.join(migrated)}")
    if carried.get("inbox_open") or carried.get("forgets_reapplied"):
        click.echo(
            f"carried over: {carried.get('inbox_open', 0)} unanswered update(s), "
            f"{carried.get('forgets_reapplied', 0)} forget(s) applied again"
        )
    click.echo(f"restored {settings.database_path} from {source}" + (" (through the running server)" if server else ""))


def _running_server(settings) -> str | None:
    """The local server's origin when one answers there, else None."""
    import httpx

    host = settings.config.server.host
    host = "127.0.0.1" if host in ("0.0.0.0", "", "::") else host  # noqa: S104 - the address it listens on
    origin = f"http://{host}:{settings.config.server.port}"
    try:
        httpx.get(f"{origin}/healthz", timeout=2.0)
    except httpx.TransportError:
        return None
    return origin


def _restore_through(origin: str, settings, path: Path | None, timestamp: str | None) -> dict:
    import httpx

    token = settings.secrets.admin_token
    if not token:
        raise click.ClickException(
            f"a server is running at {origin}: set ASH_ADMIN_TOKEN so the restore goes through it (or stop it)"
        )
    body = {"path": str(path)} if path is not None else {"from_replica": True, "timestamp": timestamp}
    try:
        answer = httpx.post(
            f"{origin}/admin/restore", json=body, headers={"Authorization": f"Bearer {token}"}, timeout=600.0
        )
    except httpx.TransportError as exc:
        raise click.ClickException(f"the server at {origin} did not answer the restore: {exc}") from None
    if answer.status_code != 200:
        detail = (
            answer.json().get("detail") if answer.headers.get("content-type", "").startswith("application/json") else ""
        )
        raise click.ClickException(f"the server refused the restore ({answer.status_code}): {detail or answer.text}")
    return answer.json()


def _restore_here(settings, path: Path | None, timestamp: str | None) -> tuple:
    import os

    from lib.backup import BackupError
    from lib.inbox.restore import restore_database
    from lib.replica.litestream import ReplicaError

    try:
        result = restore_database(settings, os.environ, source=path, timestamp=timestamp)
    except (BackupError, ReplicaError) as exc:
        raise click.ClickException(str(exc)) from None
    return result.previous_copy, result.applied_migrations, result.carried
