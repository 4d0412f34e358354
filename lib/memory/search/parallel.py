"""The vector half of a hybrid search beside the full-text half: a small thread pool, and idle
second connections to each database file, borrowed for one query and given back.

The KNN runs on a worker thread with its own connection while the calling thread runs the FTS
query (sqlite-vec and FTS5 release the GIL). At 100k messages: embed ~7 ms, then KNN ~7 ms next
to FTS ~5 ms. A module-level cache on purpose: it holds connections, not decisions.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor

import apsw

from lib.db import connect

PARALLEL = True
PARALLEL_WORKERS = 2
SIDE_DATABASES = 4  # database files with idle second connections kept open (least recently used closed)

_pool: ThreadPoolExecutor | None = None
_lock = threading.Lock()
# Idle second connections by database file, most recently used last: a worker borrows one for
# a query and gives it back, so closing them (close_side_connections) never races a query.
_idle: OrderedDict[str, list[apsw.Connection]] = OrderedDict()


def executor() -> ThreadPoolExecutor:
    """The pool the side halves run on (made on first use)."""
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=PARALLEL_WORKERS, thread_name_prefix="ash-retrieval")
        return _pool


def borrow(path: str) -> apsw.Connection:
    """An idle second connection to the file at `path`, or a new one."""
    with _lock:
        idle = _idle.get(path)
        if idle:
            return idle.pop()
    return connect(path)


def give_back(path: str, conn: apsw.Connection) -> None:
    """Keep a borrowed connection for the next query (closing the least recently used files')."""
    closing = []
    with _lock:
        _idle.setdefault(path, []).append(conn)
        _idle.move_to_end(path)
        while len(_idle) > SIDE_DATABASES:
            closing += _idle.popitem(last=False)[1]
    for old in closing:
        old.close()


def close_side_connections() -> None:
    """Close the idle second connections hybrid searches keep open (before a database file is
    removed, or at shutdown)."""
    with _lock:
        closing = [c for conns in _idle.values() for c in conns]
        _idle.clear()
    for conn in closing:
        conn.close()


def side_path(conn: apsw.Connection) -> str | None:
    """The file a second connection may read for `conn`, or None to stay on `conn`: an in-memory
    database has no file, and inside a transaction another connection would miss its writes."""
    if not PARALLEL or conn.in_transaction:
        return None
    path = conn.filename
    return path if path and path != ":memory:" else None
