"""A group's memory following it to a new chat id (a group upgraded to a supergroup).

Telegram gives the supergroup a new id, and everything Ash keeps under the old one is the same
group's: its transcript, what was remembered there, the index rows and vectors that find them,
and what /why recorded of its answers. Moving is one UPDATE per table inside the caller's
transaction, and moving again finds nothing left under the old id: it may run any number of times.
"""

from __future__ import annotations

import apsw

from lib.db import rows
from lib.memory.scope import GROUP_PREFIX

OWNED_TABLES = {
    "messages": "owner_user_id",
    "memories": "owner_user_id",
    "search_chunks": "owner_user_id",
    "answer_sources": "memory_owner",
}
EMBEDDED_CHUNKS_SQL = "SELECT id, kind FROM search_chunks WHERE owner_user_id = ? AND embedded = 1"


def group_owner(chat_id: int | str) -> str:
    """The memory owner of a group chat (lib/memory/scope.py)."""
    return f"{GROUP_PREFIX}{chat_id}"


def move_group_memory(conn: apsw.Connection, old_chat_id: int | str, new_chat_id: int | str) -> dict[str, int]:
    """Move everything owned by the group `old_chat_id` to `new_chat_id`; counts by table.

    Vectors are partitioned by owner inside vec0, which cannot change a partition key in place:
    each moved chunk's vector is taken out and put back under the new owner, unchanged."""
    from lib.memory.search import vectors  # numpy: loaded by the first move, not at start-up

    old, new = group_owner(old_chat_id), group_owner(new_chat_id)
    moved_vectors = 0
    if vectors.exists(conn):
        for chunk in rows(conn, EMBEDDED_CHUNKS_SQL, (old,)):
            found = conn.execute(vectors.VECTOR_SQL, (chunk["id"],)).fetchone()
            if found is None:
                continue
            vectors.delete(conn, [chunk["id"]])
            vectors.insert(conn, chunk["id"], new, chunk["kind"], vectors.from_blob(found[0]))
            moved_vectors += 1
    counts = {"vectors": moved_vectors}
    for table, column in OWNED_TABLES.items():
        conn.execute(f"UPDATE {table} SET {column} = ? WHERE {column} = ?", (new, old))
        counts[table] = conn.changes()
    return counts
