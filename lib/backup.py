"""Backups and restores of the one SQLite file, always through SQLite's online backup API.

A backup is a consistent snapshot even while the server writes (WAL readers see one
transaction). A restore checks that the file is an intact SQLite database of Ash's, keeps a
copy of the current database next to it, copies the backup in and migrates it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import apsw

from lib import migrations
from lib.db import PAGES_PER_STEP, connect, copy_database, stamp
from lib.errors import AshError
from lib.migrations import harden, migrate, schema_differences, status

SQLITE_HEADER = b"SQLite format 3\x00"
# Tables only Ash's schema has together; a database without them is someone else's.
ASH_TABLES = {"schema_migrations", "sessions", "messages", "memories", "user_profiles"}
# Litestream's own bookkeeping tables, which it creates in every database it replicates (so every
# replica and every copy of a replicated database has them), accepted only exactly as it defines them.
LITESTREAM_TABLES = {
    "_litestream_seq": "CREATE TABLE _litestream_seq (id INTEGER PRIMARY KEY, seq INTEGER)",
    "_litestream_lock": "CREATE TABLE _litestream_lock (id INTEGER)",
}


class BackupError(AshError):
    """A backup could not be written, or a file to restore is not a usable Ash database."""


@dataclass(frozen=True)
class RestoreResult:
    """What a restore did."""

    restored_from: Path
    previous_copy: Path | None
    applied_migrations: list[str]
    # What `prepare` reported (lib/inbox/restore.py: what was carried over from the live database).
    carried: dict = field(default_factory=dict)


def backup_to(db_path: Path, target: Path, *, overwrite: bool = False) -> Path:
    """Snapshot the database at `db_path` to `target` (a directory gets `ash-<stamp>.db` inside)."""
    if not db_path.is_file():
        raise BackupError(f"there is no database at {db_path} to back up")
    if target.is_dir():
        target = target / f"ash-{stamp()}.db"
    if not target.parent.is_dir():
        # A mistyped folder is more likely than a wish for a new one: say so, create nothing.
        raise BackupError(f"the folder {target.parent} does not exist; create it first, or choose another path")
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


def _litestream_bookkeeping(conn: apsw.Connection) -> set[str]:
    """The schema differences that are only Litestream's tables, exactly as Litestream makes them."""
    sql = "SELECT name, sql FROM sqlite_schema WHERE type = 'table' AND name IN (?, ?)"
    found = conn.execute(sql, tuple(LITESTREAM_TABLES))
    return {
        f"an extra table {name!r} that Ash's migrations do not make"
        for name, sql in found
        if LITESTREAM_TABLES.get(name) == sql
    }


def _unexpected_schema(conn: apsw.Connection) -> list[str]:
    """How the schema differs from Ash's at its recorded version, Litestream's tables aside."""
    return [d for d in schema_differences(conn, migrations.STEPS) if d not in _litestream_bookkeeping(conn)]


def _refuse_schema(path: Path, differences: list[str]) -> None:
    if differences:
        shown = "; ".join(differences[:5]) + (f"; and {len(differences) - 5} more" if len(differences) > 5 else "")
        raise BackupError(f"{path} is not a database Ash made, so it is not restored: {shown}")


def inspect_backup(source_path: Path) -> None:
    """Raise BackupError unless `source_path` is exactly an Ash database: intact, of a version
    this Ash knows, and with the very schema Ash's migrations make at that version.

    A backup is a file from somewhere else: a trigger planted in it (copying every new message
    into a memory everyone sees, say) would run inside Ash once restored, and migrating it would
    fire it. So it is read first, read-only, in SQLite's defensive mode with an untrusted schema,
    and compared with what the migrations make; nothing writes to it before that passes."""
    check_ash_database(source_path)
    probe = harden(connect(source_path, readonly=True))
    try:
        unknown = status(probe).unknown
        if unknown:
            raise BackupError(
                f"{source_path} was written by a newer version of Ash (migrations {', '.join(unknown)}); "
                "upgrade Ash before restoring it"
            )
        differences = _unexpected_schema(probe)
    except apsw.Error as exc:
        raise BackupError(f"{source_path} cannot be read as Ash's database: {exc}") from exc
    finally:
        probe.close()
    _refuse_schema(source_path, differences)


def _drop_vector_tables(conn: apsw.Connection) -> None:
    """Drop the file's sqlite-vec tables and mark every chunk unembedded: the vectors are rebuilt
    from the canonical rows (the memory service embeds them again), never taken from the file."""
    rows = conn.execute(migrations.SCHEMA_SQL).fetchall()
    vector = migrations.vector_tables(rows)
    virtual = [name for kind, name, _, sql in rows if name in vector and "VIRTUAL" in str(sql).upper()]
    with conn:
        for name in virtual:  # dropping the vec0 table drops its shadow tables
            conn.execute(f'DROP TABLE "{name}"')
        conn.execute("UPDATE search_chunks SET embedded = 0 WHERE embedded = 1")  # 2: full text only
        conn.execute("DELETE FROM meta WHERE key LIKE 'vectors.%'")


def restore_from(
    source_path: Path, db_path: Path, *, prepare: Callable[[apsw.Connection], dict] | None = None
) -> RestoreResult:
    """Replace the database at `db_path` with `source_path`, keeping a copy of the current one.

    The file is inspected first (inspect_backup). Then a copy of it is migrated to this version
    of Ash next to the live database; only when that worked is it written into the live file,
    so a failed migration leaves the live database as it was. `prepare` is handed the migrated
    copy before that (what the live database must pass on to it). A running server must have
    stopped writing meanwhile (lib/web/restore.py pauses it).
    """
    if db_path.exists() and source_path.resolve() == db_path.resolve():
        raise BackupError("that file is the live database itself; restore from a backup copy")
    inspect_backup(source_path)
    staged = db_path.with_name(f"{db_path.name}.restoring-{stamp()}")
    try:
        source = harden(connect(source_path, readonly=True))
        try:
            copy_database(source, staged)
        finally:
            source.close()
        work = harden(connect(staged))
        try:
            # Migrated first: the columns it resets are as old as m003.
            applied = migrate(work, None, migrations.STEPS)
            _drop_vector_tables(work)
            # Once more on what will be written: with the vectors gone and the steps applied it
            # must be exactly today's schema (a table that only posed as a vector table's is not).
            _refuse_schema(source_path, _unexpected_schema(work))
            carried = prepare(work) if prepare is not None else {}
        finally:
            work.close()
    except (apsw.Error, AshError) as exc:
        raise BackupError(f"restore failed ({exc}); the live database was not touched") from exc
    else:
        previous = None
        if db_path.is_file():
            previous = backup_to(db_path, db_path.with_name(f"{db_path.name}.pre-restore-{stamp()}.bak"))
        ready = connect(staged, readonly=True)
        dest = connect(db_path)
        try:
            # Page by page into the live file, so its WAL and other connections stay consistent.
            with dest.backup("main", ready, "main") as step:
                while not step.done:
                    step.step(PAGES_PER_STEP)
        except apsw.Error as exc:
            raise BackupError(f"restore failed ({exc}); the previous database was kept at {previous}") from exc
        finally:
            ready.close()
            dest.close()
    finally:
        for leftover in (staged, staged.with_name(staged.name + "-wal"), staged.with_name(staged.name + "-shm")):
            leftover.unlink(missing_ok=True)
    return RestoreResult(source_path, previous, applied, carried)
