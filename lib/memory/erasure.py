"""Deleting for real, shared by forgetting (lib/memory/forget.py) and the end of a forget's hold
(lib/memory/holds.py): freed pages zeroed, FTS segments merged, the WAL checkpointed; and the
turns beside deleted ones, whose index chunks quote them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import apsw

from lib.config import Settings
from lib.db import rows

SESSIONS_OF_SQL = "SELECT DISTINCT session_id FROM messages WHERE id IN (SELECT value FROM json_each(?))"
SESSION_TURNS_SQL = "SELECT id FROM messages WHERE session_id = ? AND role IN ('user', 'assistant') ORDER BY id"


@contextmanager
def secure_delete(conn: apsw.Connection, settings: Settings) -> Iterator[None]:
    """Zero freed content while deleting, then purge FTS segments and the WAL."""
    conn.pragma("secure_delete", True)
    try:
        yield
    finally:
        # Back to what every connection runs with (lib/db.py connect).
        conn.pragma("secure_delete", "FAST")
    # Deleted FTS5 tokens stay in old segments until they are merged.
    conn.execute("INSERT INTO search_fts (search_fts) VALUES ('optimize')")
    # Litestream (on when a replica is set) keeps a read transaction open: a TRUNCATE would wait
    # the whole busy timeout and give up (10 s a forget, measured). Litestream checkpoints the WAL
    # itself (lib/replica/target.py); a PASSIVE one copies what it can now and never waits.
    conn.pragma("wal_checkpoint", "PASSIVE" if settings.replica_url else "TRUNCATE")


def surviving_neighbours(conn: apsw.Connection, doomed: list[int]) -> list[int]:
    """Messages that stay but sit next to a deleted one: their chunks quote it and are rebuilt."""
    gone = set(doomed)
    neighbours: set[int] = set()
    for row in rows(conn, SESSIONS_OF_SQL, (json.dumps(doomed),)):
        turns = [r["id"] for r in rows(conn, SESSION_TURNS_SQL, (row["session_id"],))]
        for i, message_id in enumerate(turns):
            if message_id in gone:
                continue
            if (i > 0 and turns[i - 1] in gone) or (i + 1 < len(turns) and turns[i + 1] in gone):
                neighbours.add(message_id)
    return sorted(neighbours)
