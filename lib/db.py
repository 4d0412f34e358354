"""The one way to open the database: apsw with best practice applied and sqlite-vec loaded."""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import apsw

from lib.errors import DatabaseUnavailable

BUSY_TIMEOUT_MS = 10_000
sqlite_log = logging.getLogger("ash.sqlite")


# apsw.bestpractice's recommended settings, applied to every connection this process opens: the
# busy timeout first (apsw's own hook sets 100 ms before switching to WAL, so a connection opened
# while other threads wrote failed with "database is locked"), then WAL, foreign keys, no
# double-quoted string literals, recursive triggers and query-planner statistics. Written out here
# because importing apsw.bestpractice (it imports apsw.ext) costs ~40 ms of every cold start.
def _best_practice(connection: apsw.Connection) -> None:
    connection.set_busy_timeout(BUSY_TIMEOUT_MS)
    writable = not connection.readonly("main")
    if writable:
        with contextlib.suppress(apsw.ReadOnlyError):  # the journal may be read-only all the same
            connection.pragma("journal_mode", "wal")
    connection.pragma("foreign_keys", "ON")
    connection.config(apsw.SQLITE_DBCONFIG_DQS_DML, 0)
    connection.config(apsw.SQLITE_DBCONFIG_DQS_DDL, 0)
    if writable:
        with contextlib.suppress(apsw.ReadOnlyError):
            connection.pragma("optimize", 0x10002)
    connection.pragma("recursive_triggers", "ON")


# Result codes whose log line only repeats the exception the caller gets (and handles or logs
# with more context), or that SQLite recovers from by itself: a stale schema re-read, a busy lock
# waited out, a constraint. Logged at ERROR they looked alarming (a second connection's first query
# after the vector table was created logged "no such table: vec_chunks" and then succeeded).
_ROUTINE = {apsw.SQLITE_ERROR, apsw.SQLITE_SCHEMA, apsw.SQLITE_BUSY, apsw.SQLITE_LOCKED, apsw.SQLITE_CONSTRAINT}


def _log_sqlite(code: int, message: str) -> None:
    """SQLite's own log into ours: recovery and warnings, I/O errors, corruption, misuse."""
    primary = code & 0xFF
    if primary in _ROUTINE:
        level = logging.DEBUG
    elif primary in (apsw.SQLITE_WARNING, apsw.SQLITE_NOTICE):
        level = logging.WARNING  # e.g. a WAL recovered after a crash, an automatic index
    else:
        level = logging.ERROR
    name = apsw.mapping_result_codes.get(primary, str(primary))
    sqlite_log.log(level, "SQLITE_LOG: %s (%d) %s", message, code, name)


apsw.connection_hooks.append(_best_practice)
apsw.config(apsw.SQLITE_CONFIG_LOG, _log_sqlite)


def _vec0_path() -> str:
    """Where sqlite-vec's loadable extension is, without importing the package (it imports numpy:
    ~140 ms of cold start for one path)."""
    spec = importlib.util.find_spec("sqlite_vec")
    if spec is None or not spec.submodule_search_locations:
        raise DatabaseUnavailable("sqlite-vec is not installed; run the setup again")
    return str(Path(spec.submodule_search_locations[0]) / "vec0")


VEC0_PATH = _vec0_path()


def create_private(path: Path) -> None:
    """Create `path` empty and readable by its owner only (0600), unless it exists.

    The database holds people's conversations: it, its backups and its pre-migration copies
    are created 0600 whatever the umask (SQLite gives its -wal and -shm files the database
    file's permissions). A folder made for it is the owner's only too (0700)."""
    make_private_dir(path.parent)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))


def make_private_dir(path: Path) -> None:
    """Create the folder `path` (and its parents) if missing; the folder itself 0700, since it
    holds the database and secrets.env (an existing folder keeps its mode: it is the user's)."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)


def write_private_text(path: Path, text: str) -> None:
    """Write `text` to `path` readable by its owner only (0600) from the first byte: an export
    holds people's conversations."""
    descriptor = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    os.fchmod(descriptor, 0o600)  # an existing file being overwritten gets the same protection
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)


class ThreadCrossing(RuntimeError):
    """A thread used another thread's connection: a bug (Database.conn() was called in one thread
    and its connection handed to another, e.g. as an argument of asyncio.to_thread)."""


class ThreadConnection(apsw.Connection):
    """A connection that only the thread which opened it may use (Database.conn's).

    apsw refuses a connection used by two threads at the same moment, but only when they happen
    to meet: a turn handed the event loop's connection to a worker thread and failed 1 time in
    80 with ThreadingViolationError, which retried the turn and sent a second answer. Checking
    the thread on every way into the connection makes such a hand-over fail every time, in the
    tests, instead of once in a while in production (about a microsecond a statement)."""

    def __init__(self, *args, **kwargs):
        self.owner = threading.get_ident()  # set first: apsw's connection hooks already use it
        super().__init__(*args, **kwargs)

    def _mine(self) -> None:
        if threading.get_ident() != self.owner:
            raise ThreadCrossing(
                f"a connection to {self.filename} opened by thread {self.owner} was used by thread "
                f"{threading.get_ident()}; call Database.conn() in the thread that uses it"
            )

    def execute(self, statements, bindings=None, **kwargs):
        self._mine()
        return super().execute(statements, bindings, **kwargs)

    def executemany(self, statements, sequenceofbindings, **kwargs):
        self._mine()
        return super().executemany(statements, sequenceofbindings, **kwargs)

    def cursor(self):
        self._mine()
        return super().cursor()

    def pragma(self, name, value=None, **kwargs):
        self._mine()
        return super().pragma(name, value, **kwargs)

    def __enter__(self):
        self._mine()
        return super().__enter__()


def connect(path: str | Path, *, readonly: bool = False, owned: bool = False) -> apsw.Connection:
    """Open `path` (created 0600 if missing unless read-only) with sqlite-vec and FTS5 ready.

    `owned`: only this thread may use the connection (ThreadConnection)."""
    path = Path(path)
    flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
    try:
        if not readonly and str(path) != ":memory:":
            create_private(path)
        conn = (ThreadConnection if owned else apsw.Connection)(str(path), flags=flags)
        conn.set_busy_timeout(BUSY_TIMEOUT_MS)
        conn.enable_load_extension(True)
        conn.load_extension(VEC0_PATH)
        conn.enable_load_extension(False)
        # WAL with NORMAL sync is durable against process crashes; only a power cut may lose
        # the last commits, which Telegram then redelivers.
        conn.pragma("synchronous", "NORMAL")
        # A row rewritten in place (a memory's review status, its supersession link) leaves its
        # old copy in the page's free space; FAST zeroes that at no extra I/O, so a later forget
        # (which turns secure_delete fully on) leaves no earlier copy of the text behind.
        conn.pragma("secure_delete", "FAST")
    except (apsw.Error, OSError) as exc:
        raise DatabaseUnavailable(f"cannot open database {path}: {exc}") from exc
    return conn


class Database:
    """A path plus one connection per thread (apsw connections are cheap to keep open)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._open: list[apsw.Connection] = []
        # Bumped by close(): a thread's connection from before it is stale and reopened on use.
        self._generation = 0

    def conn(self) -> apsw.Connection:
        """This thread's connection, opened on first use; no other thread may use it."""
        held = getattr(self._local, "held", None)
        if held is not None and held[0] == self._generation:
            return held[1]
        conn = connect(self.path, owned=True)
        with self._lock:
            self._open.append(conn)
            self._local.held = (self._generation, conn)
        return conn

    def close(self) -> None:
        """Close the connections of every thread (at shutdown, once the work is stopped).

        A server worker ends with os._exit, so connections of its pool threads were never
        closed: the WAL stayed behind and the next start had to recover it. The last connection
        to close checkpoints the WAL into the database and removes it."""
        with self._lock:
            closing, self._open = self._open, []
            self._generation += 1
        for conn in closing:
            close_when_free(conn)


# How long shutdown waits for a thread still inside a statement on a connection it is closing.
CLOSE_WAIT = 5.0


def close_when_free(conn: apsw.Connection, wait: float = CLOSE_WAIT) -> None:
    """Close `conn` once no other thread is inside one of its calls.

    Cancelling a task at shutdown does not stop the thread it was waiting on (asyncio.to_thread),
    so a statement may still be running there; apsw refuses to close under it."""
    deadline = time.monotonic() + wait
    while True:
        try:
            conn.close()
            return
        except apsw.ThreadingViolationError:
            if time.monotonic() > deadline:
                sqlite_log.warning("a connection to %s was still busy at shutdown; left open", conn.filename)
                return
            time.sleep(0.01)


# Writers of this process queue on a lock per database file instead of meeting in SQLite's busy
# handler, which sleeps (1 ms, then up to 100 ms a try) rather than queueing: under a burst of
# webhook inserts next to the inbox worker's claims, those sleeps cut throughput tenfold and pushed
# p99 into seconds. Other processes on the same file still wait in the busy handler, as they must.
_WRITE_LOCKS: dict[str, threading.RLock] = {}
_WRITE_LOCKS_GUARD = threading.Lock()


def _write_lock(conn: apsw.Connection) -> threading.RLock:
    with _WRITE_LOCKS_GUARD:
        return _WRITE_LOCKS.setdefault(conn.filename, threading.RLock())


@contextlib.contextmanager
def immediate(conn: apsw.Connection) -> Iterator[apsw.Connection]:
    """A write transaction that takes the write lock first (BEGIN IMMEDIATE); nests like `with conn:`.

    A plain `with conn:` starts as a reader; when its first statement is a read and another
    process commits before its first write, SQLite answers "database is locked" at once
    (the busy timeout cannot help a stale snapshot). Taking the lock up front waits instead.
    """
    if conn.in_transaction:
        with conn:
            yield conn
        return
    with _write_lock(conn):
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")


def write(conn: apsw.Connection, sql: str, params: tuple | dict = ()) -> int:
    """Run one writing statement in its own immediate transaction; returns the rows it changed."""
    with immediate(conn):
        conn.execute(sql, params)
        return conn.changes()


def write_rows(conn: apsw.Connection, sql: str, params: tuple | dict = ()) -> list[dict]:
    """Run one writing statement with RETURNING in its own immediate transaction; returns its rows."""
    with immediate(conn):
        return rows(conn, sql, params)


def now_iso() -> str:
    """UTC now as ISO 8601 with milliseconds and a Z, the format every timestamp column uses."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def iso(ts: float) -> str:
    """A Unix time in the timestamp columns' format."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def monotonic_ms() -> int:
    """Milliseconds from a monotonic clock, for durations."""
    return int(time.monotonic() * 1000)


def rows(conn: apsw.Connection, sql: str, params: tuple | dict = ()) -> list[dict]:
    """Run a query and return its rows as dicts keyed by column name."""
    cursor = conn.execute(sql, params)
    try:
        names = [d[0] for d in cursor.get_description()]
    except apsw.ExecutionCompleteError:
        return []
    return [dict(zip(names, row, strict=True)) for row in cursor]


def one(conn: apsw.Connection, sql: str, params: tuple | dict = ()) -> dict | None:
    """The first row of a query as a dict, or None."""
    cursor = conn.execute(sql, params)
    row = cursor.fetchone()
    if row is None:
        return None
    return dict(zip((d[0] for d in cursor.get_description()), row, strict=True))


# Pages copied per step of SQLite's online backup (small steps let writers in between).
PAGES_PER_STEP = 1024


def stamp() -> str:
    """A filesystem-safe UTC timestamp for backup names."""
    return now_iso().replace(":", "").replace("-", "").replace(".", "")


def copy_database(source: apsw.Connection, target: Path) -> Path:
    """Write a consistent snapshot of `source` to `target` (overwritten, 0600) with the backup API."""
    create_private(target)
    os.chmod(target, 0o600)  # an existing file being overwritten gets the same protection
    dest = apsw.Connection(str(target))
    try:
        with dest.backup("main", source, "main") as step:
            while not step.done:
                step.step(PAGES_PER_STEP)
        # A plain rollback-journal file is the most portable thing to hand someone.
        dest.pragma("journal_mode", "DELETE")
    finally:
        dest.close()
    return target
