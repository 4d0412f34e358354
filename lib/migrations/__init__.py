"""Ash's database migrations: numbered steps applied in order (`python migrate.py` runs them).

Steps are ordered and uniquely named. Each step runs with its bookkeeping row in one
transaction, so a failed step leaves the database as it was. Re-running is a no-op. Before
steps are applied to a database that already holds data, a copy is taken with SQLite's
backup API next to it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import apsw

from lib.db import Database, connect, copy_database, immediate, now_iso, stamp
from lib.errors import AshError, MigrationError


@dataclass(frozen=True)
class Step:
    name: str
    apply: Callable[[apsw.Connection], None]


def _sql_step(name: str) -> Step:
    """A step whose body is `lib/migrations/<name>.sql`."""

    def apply(conn: apsw.Connection) -> None:
        conn.execute(resources.files("lib.migrations").joinpath(f"{name}.sql").read_text(encoding="utf-8"))

    return Step(name, apply)


STEPS: list[Step] = [
    _sql_step("m001_initial"),
    _sql_step("m002_inbox_reply_parts"),
    _sql_step("m003_chunk_embedded"),
    _sql_step("m004_inbox_open"),
    _sql_step("m005_group_privacy"),
    _sql_step("m006_denials_index"),
    _sql_step("m007_denied_users"),
    _sql_step("m008_chat_models"),
    _sql_step("m009_schedules"),
    _sql_step("m010_approvals"),
    _sql_step("m011_mcp"),
    _sql_step("m012_memory_you_can_see"),
    _sql_step("m013_auth_failures_in_memory"),
    _sql_step("m014_inbox_answer"),
    _sql_step("m015_followups"),
    _sql_step("m016_memory_trust"),
    _sql_step("m017_memory_proposals"),
    _sql_step("m018_memory_proposal_kinds"),
    _sql_step("m019_forget_holds"),
    _sql_step("m020_standing_instructions"),
]

APPLIED_SQL = "SELECT 1 FROM schema_migrations WHERE name = ?"
CREATE_BOOKKEEPING_SQL = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    name TEXT PRIMARY KEY,
    applied_at TEXT NOT NULL
)
"""


@dataclass(frozen=True)
class Status:
    applied: list[str]
    pending: list[str]
    unknown: list[str]

    @property
    def current(self) -> bool:
        return not self.pending and not self.unknown


def _applied(conn: apsw.Connection) -> list[str]:
    exists = conn.execute("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations'").fetchone()
    if not exists:
        return []
    return [name for (name,) in conn.execute("SELECT name FROM schema_migrations ORDER BY name")]


def status(conn: apsw.Connection, steps: list[Step] = STEPS) -> Status:
    """Which steps are applied, pending, or unknown to this version (a newer Ash's)."""
    applied = _applied(conn)
    known = [s.name for s in steps]
    return Status(
        applied=[n for n in known if n in applied],
        pending=[n for n in known if n not in applied],
        unknown=[n for n in applied if n not in known],
    )


def _has_data(conn: apsw.Connection) -> bool:
    return conn.execute("SELECT count(*) FROM sqlite_schema WHERE type = 'table'").fetchone()[0] > 0


def migrate(conn: apsw.Connection, db_path: Path | None = None, steps: list[Step] = STEPS) -> list[str]:
    """Apply pending steps in order; returns the names applied. Raises MigrationError."""
    state = status(conn, steps)
    if state.unknown:
        raise MigrationError(
            "this database was migrated by a newer version of Ash (unknown steps: "
            + ", ".join(state.unknown)
            + "); upgrade Ash, or restore a backup taken before the upgrade"
        )
    if not state.pending:
        return []
    if db_path is not None and _has_data(conn):
        copy_database(conn, db_path.with_name(f"{db_path.name}.pre-{state.pending[0]}-{stamp()}.bak"))
    conn.execute(CREATE_BOOKKEEPING_SQL)
    done = []
    for step in steps:
        if step.name not in state.pending:
            continue
        try:
            # The write lock first, then look again: two processes starting on one database
            # (two servers, a server and `ash` beside it) both find a step pending, and the
            # second would fail on what the first made ("table ... already exists").
            with immediate(conn):
                if conn.execute(APPLIED_SQL, (step.name,)).fetchone() is not None:
                    continue
                step.apply(conn)
                conn.execute("INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)", (step.name, now_iso()))
        except apsw.Error as exc:
            raise MigrationError(f"migration {step.name} failed and was rolled back: {exc}") from exc
        done.append(step.name)
    return done


def migrate_path(path: Path) -> list[str]:
    """Open the database at `path`, migrate it, close it."""
    conn = connect(path)
    try:
        return migrate(conn, path)
    finally:
        conn.close()


SCHEMA_SQL = """
SELECT type, name, tbl_name, sql FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name
"""
EVERY_OBJECT_SQL = "SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY type, name"
# SQLite's own bookkeeping tables (AUTOINCREMENT's counters, ANALYZE's statistics): SQLite makes
# them, not a migration, so a database may or may not hold them; when it does, they must be
# exactly as SQLite defines them (a CHECK added to sqlite_sequence would fail every insert into
# an AUTOINCREMENT table).
SQLITE_BOOKKEEPING = {
    "sqlite_sequence": "CREATE TABLE sqlite_sequence(name,seq)",
    "sqlite_stat1": "CREATE TABLE sqlite_stat1(tbl,idx,stat)",
    "sqlite_stat2": "CREATE TABLE sqlite_stat2(tbl,idx,sampleno,sample)",
    "sqlite_stat3": "CREATE TABLE sqlite_stat3(tbl,idx,neq,nlt,ndlt,sample)",
    "sqlite_stat4": "CREATE TABLE sqlite_stat4(tbl,idx,neq,nlt,ndlt,sample)",
}
QUOTES = {"'": "'", '"': '"', "`": "`", "[": "]"}


def vector_tables(rows: list[tuple]) -> set[str]:
    """sqlite-vec's tables (a vec0 virtual table and its shadow tables): the memory module makes
    them for the configured model, not the migrations, and a restore rebuilds them."""
    vtabs = {
        name for kind, name, _, sql in rows if kind == "table" and "USING VEC0" in " ".join((sql or "").upper().split())
    }
    return {name for _, name, _, _ in rows if name in vtabs or any(name.startswith(f"{v}_") for v in vtabs)}


def schema_signature(conn: apsw.Connection) -> list[tuple]:
    """The schema as comparable rows: tables by their columns, keys and foreign keys (ALTER TABLE
    appends columns, so the CREATE text may differ); indexes, triggers, views and virtual tables
    by their SQL. sqlite-vec's own tables are left out (see vector_tables); a trigger or view
    that touches them is not. For comparing `schema.sql` with the migrations; a restore compares
    more (schema_objects)."""
    rows = conn.execute(SCHEMA_SQL).fetchall()
    vector = vector_tables(rows)
    described = []
    for kind, name, table, sql in rows:
        if kind == "table" and name in vector:
            continue
        if kind == "table" and not (sql or "").upper().startswith("CREATE VIRTUAL"):
            # Names come from the database's own schema table, quoted as identifiers.
            quoted = '"' + name.replace('"', '""') + '"'
            columns = sorted(tuple(c[1:6]) for c in conn.execute(f"PRAGMA table_xinfo({quoted})"))
            keys = sorted(tuple(k[2:]) for k in conn.execute(f"PRAGMA foreign_key_list({quoted})"))
            described.append((kind, name, table, repr(columns), repr(keys)))
        else:
            described.append((kind, name, table, " ".join((sql or "").split())))
    return described


def normalised_sql(sql: str | None) -> str:
    """`sql` with each run of white space outside quotes made one space: only the layout of the
    text is forgiven, never a character of a literal, a name, a constraint or a collation."""
    if sql is None:
        return ""
    out: list[str] = []
    closing = None
    for char in sql.strip():
        if closing is not None:
            out.append(char)
            if char == closing:
                closing = None
        elif char.isspace():
            if out and out[-1] != " ":
                out.append(" ")
        else:
            out.append(char)
            closing = QUOTES.get(char)
    return "".join(out)


def schema_objects(conn: apsw.Connection) -> dict[tuple[str, str], tuple[str, str]]:
    """Every object of the schema, (type, name) -> (its table, its whole normalised SQL): tables
    too, so a CHECK, a DEFAULT or a collation counts, and indexes SQLite makes for a UNIQUE or
    PRIMARY KEY. Left out: sqlite-vec's tables (rebuilt on restore, see vector_tables) and
    SQLite's own bookkeeping tables (checked by bookkeeping_differences), by their exact names;
    a trigger or view that touches them is kept."""
    rows = conn.execute(EVERY_OBJECT_SQL).fetchall()
    left_out = vector_tables(rows) | SQLITE_BOOKKEEPING.keys()
    return {
        (kind, name): (table, normalised_sql(sql))
        for kind, name, table, sql in rows
        # ...with the indexes SQLite made for those tables' keys (they have no SQL of their own).
        if not ((kind == "table" and name in left_out) or (kind == "index" and sql is None and table in left_out))
    }


def bookkeeping_differences(conn: apsw.Connection) -> list[str]:
    """SQLite's own tables that are not as SQLite makes them, one sentence each."""
    found = conn.execute(EVERY_OBJECT_SQL).fetchall()
    return [
        f"SQLite's own table {name!r} is not defined as SQLite defines it"
        for kind, name, _, sql in found
        if kind == "table" and name in SQLITE_BOOKKEEPING and normalised_sql(sql) != SQLITE_BOOKKEEPING[name]
    ]


def expected_objects(applied: list[str], steps: list[Step] | None = None) -> dict[tuple[str, str], tuple[str, str]]:
    """The schema objects the migrations `applied` make on a blank database."""
    conn = connect(":memory:")
    try:
        migrate(conn, None, [s for s in (STEPS if steps is None else steps) if s.name in applied])
        return schema_objects(conn)
    finally:
        conn.close()


def schema_differences(conn: apsw.Connection, steps: list[Step] | None = None) -> list[str]:
    """How the database's schema differs from what Ash's migrations make at its own recorded
    version, one sentence each naming the object; empty when it is exactly Ash's. Every object
    is compared by its whole SQL (see schema_objects)."""
    applied = status(conn, STEPS if steps is None else steps).applied
    expected = expected_objects(applied, steps)
    actual = schema_objects(conn)
    found = []
    for key in sorted(actual.keys() - expected.keys()):
        found.append(f"an extra {key[0]} {key[1]!r} that Ash's migrations do not make")
    for key in sorted(expected.keys() - actual.keys()):
        found.append(f"the {key[0]} {key[1]!r} is missing")
    for key in sorted(actual.keys() & expected.keys()):
        if actual[key] != expected[key]:
            found.append(f"the {key[0]} {key[1]!r} is not defined as Ash defines it")
    return found + bookkeeping_differences(conn)


def harden(conn: apsw.Connection) -> apsw.Connection:
    """Treat the file as untrusted: defensive mode (no writes to the schema through pragmas or
    shadow tables) and no SQL functions with side effects called from its schema."""
    conn.config(apsw.SQLITE_DBCONFIG_DEFENSIVE, 1)
    conn.config(apsw.SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0)
    return conn


def database_ready(db: Database) -> tuple[bool, str]:
    """(True, "migrated") when the database opens and has every migration applied (for /readyz)."""
    try:
        state = status(db.conn())
    except (AshError, apsw.Error) as exc:
        db.close()
        return False, f"database unavailable: {exc}"
    if state.unknown:
        return False, "database is from a newer Ash: " + ", ".join(state.unknown)
    if state.pending:
        return False, "migrations pending: " + ", ".join(state.pending)
    return True, "migrated"


def main(argv: list[str] | None = None) -> int:
    """Entry point for `python migrate.py [DATABASE]` (default: the configured database)."""
    from lib.config import load_settings

    args = sys.argv[1:] if argv is None else argv
    try:
        path = Path(args[0]) if args else load_settings().database_path
        applied = migrate_path(path)
    except AshError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{path}: applied {', '.join(applied)}" if applied else f"{path}: up to date")
    return 0
