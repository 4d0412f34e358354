"""Forgetting with a moment to take it back: what /why's Forget deleted, held for UNDO_SECONDS.

Forget deletes at once (rows, index chunks, FTS entries, vectors; lib/memory/forget.py), so the
forgotten text is in no prompt, search or screen from that moment. Pressed from /why, the rows it
deleted (entries, messages) and the note lines it removed are kept in `forget_holds` under the
forget's audit id until the window closes; the Undo button under the confirmation (or `ash
memory undo AUDIT_ID`) puts them back, re-indexed, with their ids when still free. When the
window closes the memory service deletes the hold with `secure_delete` like any forget: the text
is then gone for good, and Undo says so. Other ways to forget (the `forget` tool, `ash memory
remove`, the admin API, /forget for a whole person) hold nothing.
"""

from __future__ import annotations

import json

import apsw

from lib.config import Settings
from lib.db import immediate, one, rows
from lib.memory import store
from lib.memory.erasure import secure_delete, surviving_neighbours

UNDO_SECONDS = 10 * 60
HOLD_SQL = "INSERT INTO forget_holds (audit_id, owner_user_id, held, purge_after) VALUES (?, ?, ?, ?)"
EXPIRED_SQL = "SELECT audit_id FROM forget_holds WHERE purge_after <= ?"


def snapshot(conn: apsw.Connection, memory_ids: list[int], message_ids: list[int]) -> dict:
    """The rows a forget is about to delete, whole."""
    return {
        "memories": [
            rows(conn, "SELECT * FROM memories WHERE id = ?", (i,))[0] for i in _existing(conn, "memories", memory_ids)
        ],
        "messages": [
            rows(conn, "SELECT * FROM messages WHERE id = ?", (i,))[0] for i in _existing(conn, "messages", message_ids)
        ],
    }


def _existing(conn: apsw.Connection, table: str, ids: list[int]) -> list[int]:
    return [i for i in ids if one(conn, f"SELECT 1 FROM {table} WHERE id = ?", (i,)) is not None]


def notes_of(conn: apsw.Connection, user_id: str | None) -> list[str]:
    profile = store.get_profile(conn, user_id) if user_id else None
    return profile.notes.splitlines() if profile else []


def hold(conn: apsw.Connection, audit_id: int, owner: str | None, held: dict, now: float) -> None:
    """Keep what forget `audit_id` deleted until now + UNDO_SECONDS (inside the forget's transaction)."""
    conn.execute(HOLD_SQL, (audit_id, owner, json.dumps(held), now + UNDO_SECONDS))


def held(conn: apsw.Connection, audit_id: int, now: float) -> dict | None:
    """What forget `audit_id` deleted, while its window is open; None once it closed."""
    found = one(conn, "SELECT held, purge_after FROM forget_holds WHERE audit_id = ?", (audit_id,))
    if found is None or found["purge_after"] <= now:
        return None
    return json.loads(found["held"])


def holding(conn: apsw.Connection, now: float) -> set[int]:
    """The audit ids of the forgets whose hold is still open."""
    return {r["audit_id"] for r in rows(conn, "SELECT audit_id FROM forget_holds WHERE purge_after > ?", (now,))}


def _insert(conn: apsw.Connection, table: str, row: dict, keep_id: bool) -> int:
    # Table and column names come from this module and from the rows SELECT * read (our schema),
    # never from anyone's input; the values are bound.
    values = dict(row) if keep_id else {k: v for k, v in row.items() if k != "id"}
    columns = ", ".join(values)
    marks = ", ".join(f":{k}" for k in values)
    conn.execute(f"INSERT INTO {table} ({columns}) VALUES ({marks})", values)
    return conn.last_insert_rowid()


def _put_back(conn: apsw.Connection, table: str, row: dict) -> int:
    """Insert a held row again: under its own id when no row took it since, else a new one."""
    taken = one(conn, f"SELECT 1 FROM {table} WHERE id = ?", (row["id"],)) is not None
    return _insert(conn, table, row, keep_id=not taken)


def restore(conn: apsw.Connection, settings: Settings, audit_id: int, content: dict, actor: str) -> list[int]:
    """Put back what a forget deleted (inside the caller's transaction); returns the entries' ids."""
    from lib.memory.search import index

    messages = {}
    for row in content["messages"]:
        if one(conn, "SELECT 1 FROM sessions WHERE id = ?", (row["session_id"],)) is None:
            raise LookupError("the conversation it belonged to was deleted since")
        messages[row["id"]] = _put_back(conn, "messages", row)
    entries = {}
    for row in content["memories"]:
        source = _moved(conn, "messages", messages, row.get("source_message_id"))
        entries[row["id"]] = _put_back(conn, "memories", {**row, "source_message_id": source, "superseded_by": None})
    for row in content["memories"]:
        newer = _moved(conn, "memories", entries, row.get("superseded_by"))
        if newer is not None:
            conn.execute("UPDATE memories SET superseded_by = ? WHERE id = ?", (newer, entries[row["id"]]))
    index.index_messages(conn, settings, [*messages.values(), *_neighbours(conn, list(messages.values()))])
    index.index_memories(conn, settings, list(entries.values()))
    _restore_notes(conn, content.get("owner"), content.get("notes_removed") or [], actor)
    conn.execute("DELETE FROM forget_holds WHERE audit_id = ?", (audit_id,))
    return list(entries.values())


def _moved(conn: apsw.Connection, table: str, put_back: dict[int, int], ref: int | None) -> int | None:
    """Where a held row's link points now: to a row put back (under its id now), to a row that
    stayed, or nowhere when that row went since (as ON DELETE SET NULL would have left it)."""
    if ref is None or ref in put_back:
        return put_back.get(ref) if ref is not None else None
    return ref if one(conn, f"SELECT 1 FROM {table} WHERE id = ?", (ref,)) is not None else None


def _neighbours(conn: apsw.Connection, message_ids: list[int]) -> list[int]:
    """The turns beside the restored ones: their chunks quote their neighbours again."""
    return [i for i in surviving_neighbours(conn, message_ids) if i not in message_ids]


def _restore_notes(conn: apsw.Connection, owner: str | None, removed: list[str], actor: str) -> None:
    if not owner or not removed:
        return
    lines = notes_of(conn, owner)
    back = [line for line in removed if line not in lines]
    if back:
        store.set_notes(conn, owner, "\n".join([*lines, *back]).strip())
        store.audit(conn, actor, "note_restore", owner, lines_before=len(lines), lines_after=len(lines) + len(back))


def purge_expired(conn: apsw.Connection, settings: Settings, now: float) -> int:
    """Delete the holds whose window closed, for real (secure_delete); returns how many."""
    expired = [r["audit_id"] for r in rows(conn, EXPIRED_SQL, (now,))]
    if not expired:
        return 0
    with secure_delete(conn, settings), immediate(conn):
        for audit_id in expired:
            conn.execute("DELETE FROM forget_holds WHERE audit_id = ?", (audit_id,))
    return len(expired)
