"""Backups and restores of the one SQLite file, always through SQLite's online backup API.

A backup is a consistent snapshot even while the server writes (WAL readers see one
transaction). A restore checks that the file is an intact SQLite database of Ash's, keeps a
copy of the current database next to it, copies the backup in and migrates it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import apsw

from lib.db import PAGES_PER_STEP, connect, copy_database, stamp
from lib.errors import AshError
from lib.migrations import migrate, status

SQLITE_HEADER = b"SQLite format 3\x00"
# Tables only Ash's schema has together; a database without them is someone else's.
ASH_TABLES = {"schema_migrations", "sessions", "messages", "memories", "user_profiles"}


class BackupError(AshError):
    """A backup could not be written, or a file to restore is not a usable Ash database."""


@dataclass(frozen=True)
class RestoreResult:
    """What a restore did."""

    restored_from: Path
    previous_copy: Path | None
    applied_migrations: list[str]


def backup_to(db_path: Path, target: Path, *, overwrite: bool = False) -> Path:
    """Snapshot the database at `db_path` to `target` (a directory gets `ash-<stamp>.db` inside)."""
    if not db_path.is_file():
        raise BackupError(f"there is no database at {db_path} to back up")
    if target.is_dir():
        target = target / f"ash-{stamp()}.db"
    if target.exists() and not overwrite:
        raise BackupError(f"{target} already exists; choose another path or pass --force to overwrite it")
    if target.resolve() == db_path.resolve():
        raise BackupError("the backup path is the live database itself; choose another path")
    source = connect(db_path, readonly=True)
    try:
        return copy_database(source, target)
    except apsw.Error as exc:
        raise BackupError(f"cannot write the backup to {target}: {exc}") from exc
    finally:
        source.close()


def check_ash_database(path: Path) -> None:
    """Raise BackupError unless `path` is an intact SQLite database made by Ash."""
    if not path.is_file():
        raise BackupError(f"{path} does not exist or is not a file")
    with path.open("rb") as handle:
        if handle.read(len(SQLITE_HEADER)) != SQLITE_HEADER:
            raise BackupError(f"{path} is not a SQLite database")
    try:
        conn = connect(path, readonly=True)
    except AshError as exc:
        raise BackupError(f"{path} cannot be opened: {exc}") from exc
    try:
        verdict = conn.execute("PRAGMA quick_check").fetchone()[0]
        if verdict != "ok":
            raise BackupError(f"{path} is damaged (SQLite quick_check: {verdict})")
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
    except apsw.Error as exc:
        raise BackupError(f"{path} cannot be read as a database: {exc}") from exc
    finally:
        conn.close()
    missing = ASH_TABLES - tables
    if missing:
        raise BackupError(f"{path} is a SQLite database but not Ash's (missing tables: {', '.join(sorted(missing))})")


def restore_from(source_path: Path, db_path: Path) -> RestoreResult:
    """Replace the database at `db_path` with `source_path`, keeping a copy of the current one.

    Stop the server first: a running server keeps writing to the file being replaced.
    """
    check_ash_database(source_path)
    probe = connect(source_path, readonly=True)
    try:
        unknown = status(probe).unknown
    finally:
        probe.close()
    if unknown:
        raise BackupError(
            f"{source_path} was written by a newer version of Ash (migrations {', '.join(unknown)}); "
            "upgrade Ash before restoring it"
        )
    if db_path.exists() and source_path.resolve() == db_path.resolve():
        raise BackupError("that file is the live database itself; restore from a backup copy")
    previous = None
    if db_path.is_file():
        previous = backup_to(db_path, db_path.with_name(f"{db_path.name}.pre-restore-{stamp()}.bak"))
    source = connect(source_path, readonly=True)
    dest = connect(db_path)
    try:
        # Page by page into the live file, so its WAL and other connections stay consistent.
        with dest.backup("main", source, "main") as step:
            while not step.done:
                step.step(PAGES_PER_STEP)
        applied = migrate(dest, db_path)
    except (apsw.Error, AshError) as exc:
        raise BackupError(f"restore failed ({exc}); the previous database was kept at {previous}") from exc
    finally:
        source.close()
        dest.close()
    return RestoreResult(restored_from=source_path, previous_copy=previous, applied_migrations=applied)
