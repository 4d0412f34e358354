"""`ash replica status|run`: continuous replication of the database with Litestream."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime

import click

from lib.commands.common import settings_or_exit
from lib.errors import AshError

# What Litestream's status words mean for someone reading `ash replica status`.
LOCAL_STATUS = {
    "no database": "no database here",
    "not initialized": "none yet (Litestream reads the WAL every second; is `ash replica run` running?)",
}


@click.group()
def replica() -> None:
    """Continuous replication to S3-compatible storage with Litestream (on when ASH_REPLICA_URL is set)."""


@replica.command()
@click.option("--json", "as_json", is_flag=True, help="Print the positions as JSON.")
def status(as_json: bool) -> None:
    """Show the latest position of the database and of its replica, and how far the replica lags."""
    from lib.replica.litestream import environment, position
    from lib.replica.target import replica_of

    settings = settings_or_exit()
    try:
        target = replica_of(settings)
        if target is None:
            raise click.ClickException(
                "replication is off: set ASH_REPLICA_URL=s3://bucket/path (see docs/deploy/fly.md)"
            )
        found = position(target, environment(), settings.home)
    except AshError as exc:
        raise click.ClickException(str(exc)) from None
    age = (datetime.now(UTC) - found.replica_written_at).total_seconds() if found.replica_written_at else None
    if as_json:
        click.echo(
            json.dumps(
                {
                    "database": str(target.database),
                    "replica": target.url,
                    "local_status": found.local_status,
                    "local_txid": found.local_txid,
                    "replica_txid": found.replica_txid,
                    "replica_written_at": found.replica_written_at.isoformat() if found.replica_written_at else None,
                    "lag_transactions": found.lag,
                    "replica_age_seconds": round(age, 1) if age is not None else None,
                }
            )
        )
        return
    local = (
        f"{found.local_txid:016x}"
        if found.local_txid is not None
        else LOCAL_STATUS.get(found.local_status, found.local_status)
    )
    click.echo(f"database  {target.database}  position {local}")
    if found.replica_txid is None:
        click.echo(f"replica   {target.url}  empty (nothing replicated yet)")
        return
    click.echo(
        f"replica   {target.url}  position {found.replica_txid:016x}, "
        f"written {found.replica_written_at:%Y-%m-%d %H:%M:%S} UTC ({age:.0f} s ago)"
    )
    if found.lag is not None:
        click.echo(f"lag       {found.lag} transaction(s) not yet in the replica")


@replica.command(context_settings={"ignore_unknown_options": True})
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(command: tuple[str, ...]) -> None:
    """Run COMMAND (the server: `ash replica run -- ash serve`) under `litestream replicate -exec`.

    With ASH_REPLICA_URL set, on the writer: an empty volume is restored from the replica first
    (schema-checked like any restore), then Litestream replicates from before the server's first
    write to after its last. Without it, or on a machine that is not the writer (two Litestream
    processes on one replica path corrupt it), COMMAND runs alone. The container's entry point.
    """
    from lib.replica.boot import restore_at_boot
    from lib.replica.litestream import credential_names, litestream_env, replicate_argv
    from lib.replica.target import replica_of, write_config
    from lib.replica.writer_rule import writer_rule

    settings = settings_or_exit()
    environ = dict(os.environ)
    try:
        target = replica_of(settings)
        rule = writer_rule(settings, environ)
        if target is None or not rule.is_writer:
            if target is not None:
                click.echo(f"ash: {rule.describe()}; Litestream does not run here", err=True)
            alone = {k: v for k, v in environ.items() if k not in credential_names(environ)}
            os.execvpe(command[0], list(command), alone)  # noqa: S606 - the command given
        restore_at_boot(settings, environ)
        config = write_config(target, settings.home)
        argv = replicate_argv(config, list(command), environ)
    except AshError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"ash: replicating {target.database} to {target.url} with Litestream", err=True)
    os.execve(argv[0], argv, litestream_env(target, environ, everything=True))  # noqa: S606
