"""Forgetting that really deletes: rows, index chunks, FTS entries, vectors, cached embeddings.

Deletion runs with `PRAGMA secure_delete = ON` (freed pages are zeroed), the FTS index is
merged afterwards so deleted tokens leave its segments, and the WAL is checkpointed so old
page images do not linger in it. The audit log records counts and ids, never content.
"""

from __future__ import annotations

from collections.abc import Callable

import apsw

from lib.config import Settings
from lib.db import immediate, one, rows
from lib.memory import correct, holds, knowledge, store
from lib.memory.erasure import secure_delete, surviving_neighbours

USER_MESSAGES_SQL = "SELECT id FROM messages WHERE owner_user_id = ?"
# What the person wrote in groups (owned by the group, lib/memory/scope.py), and the answers to it.
SPOKEN_ELSEWHERE_SQL = """
SELECT id, session_id FROM messages WHERE speaker_user_id = :user AND owner_user_id IS NOT :user
"""
USER_MEMORIES_SQL = "SELECT id FROM memories WHERE owner_user_id = ?"
# The content hashes of a set of index chunks: their embeddings are cached under these.
CHUNK_HASHES_SQL = "SELECT DISTINCT content_hash FROM search_chunks WHERE kind = ? AND ref_id = ?"
HASH_STILL_USED_SQL = "SELECT 1 FROM search_chunks WHERE content_hash = ? LIMIT 1"
# Sessions whose transcript included the person: their compaction summaries may quote them.
TOUCHED_SESSIONS_SQL = "SELECT DISTINCT session_id FROM messages WHERE owner_user_id = :user OR speaker_user_id = :user"
EMPTY_OWN_SESSIONS_SQL = """
SELECT id FROM sessions s
WHERE user_id = ? AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.session_id = s.id)
"""
# The answer that followed a message in its session (it usually repeats what was said).
ANSWER_AFTER_SQL = """
SELECT id FROM messages
WHERE session_id = :session AND id > :id AND role = 'assistant'
  AND id < coalesce((SELECT min(id) FROM messages WHERE session_id = :session AND id > :id AND role = 'user'),
                    9223372036854775807)
ORDER BY id LIMIT 1
"""
EXTRACTION_CURSOR_KEY = "extraction.through.{user_id}"


def _index():
    from lib.memory.search import index

    return index


def _unindex_collecting_hashes(conn: apsw.Connection, kind: str, ref_ids: list[int]) -> set[str]:
    """Drop the index rows of `ref_ids`; returns the content hashes their chunks had."""
    hashes: set[str] = set()
    index = _index()
    for ref_id in ref_ids:
        hashes.update(r["content_hash"] for r in rows(conn, CHUNK_HASHES_SQL, (kind, ref_id)))
        index.unindex(conn, kind, ref_id)
    return hashes


def _drop_cached_embeddings(conn: apsw.Connection, hashes: set[str]) -> int:
    """Delete cached embeddings of texts no remaining chunk uses."""
    dropped = 0
    for content_hash in hashes:
        if one(conn, HASH_STILL_USED_SQL, (content_hash,)) is None:
            conn.execute("DELETE FROM embedding_cache WHERE content_hash = ?", (content_hash,))
            dropped += conn.changes()
    return dropped


def _delete_messages(conn: apsw.Connection, message_ids: list[int]) -> int:
    deleted = 0
    for message_id in message_ids:
        conn.execute("DELETE FROM messages WHERE id = ?", (message_id,))
        deleted += conn.changes()
    return deleted


def _erase(
    conn: apsw.Connection, settings: Settings, memory_ids: list[int], message_ids: list[int], neighbours: list[int]
) -> tuple[int, int, set[str]]:
    """Unindex and delete entries and messages, then re-index the neighbours whose chunks quoted them.

    Returns the entries and messages deleted and the content hashes their chunks had.
    """
    hashes = _unindex_collecting_hashes(conn, "message", message_ids + neighbours)
    hashes |= _unindex_collecting_hashes(conn, "memory", memory_ids)
    memories = 0
    for memory_id in memory_ids:
        conn.execute("DELETE FROM memories WHERE id = ?", (memory_id,))
        memories += conn.changes()
    messages = _delete_messages(conn, message_ids)
    _index().index_messages(conn, settings, neighbours)
    return memories, messages, hashes


Eraser = Callable[[apsw.Connection, str], int]


def _with_answers(conn: apsw.Connection, messages: list[dict]) -> list[int]:
    """The ids of these messages and of the answer that followed each (it often repeats them)."""
    found: set[int] = set()
    for message in messages:
        found.add(message["id"])
        answer = one(conn, ANSWER_AFTER_SQL, {"session": message["session_id"], "id": message["id"]})
        if answer:
            found.add(answer["id"])
    return sorted(found)


def forget_user(
    conn: apsw.Connection, settings: Settings, user_id: str, actor: str, *, erasers: dict[str, Eraser] | None = None
) -> dict:
    """Delete everything Ash holds about a person; returns counts (what `/forget` does): their
    own memory, and what they wrote in groups together with the answers to it."""
    message_ids = [r["id"] for r in rows(conn, USER_MESSAGES_SQL, (user_id,))]
    message_ids += _with_answers(conn, rows(conn, SPOKEN_ELSEWHERE_SQL, {"user": user_id}))
    memory_ids = [r["id"] for r in rows(conn, USER_MEMORIES_SQL, (user_id,))]
    touched = [r["session_id"] for r in rows(conn, TOUCHED_SESSIONS_SQL, {"user": user_id})]
    neighbours = surviving_neighbours(conn, message_ids)
    with secure_delete(conn, settings), immediate(conn):
        memories, messages, hashes = _erase(conn, settings, memory_ids, message_ids, neighbours)
        for session_id in touched:
            conn.execute("UPDATE sessions SET summary = NULL, summary_through = NULL WHERE id = ?", (session_id,))
        empty = [r["id"] for r in rows(conn, EMPTY_OWN_SESSIONS_SQL, (user_id,))]
        for session_id in empty:
            conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
        conn.execute("DELETE FROM tool_executions WHERE user_id = ?", (user_id,))
        tools = conn.changes()
        # Calls that waited (or waited once) for their Run / Deny keep the turn's state: the
        # person's words, a document, the command itself. A press on an old button finds nothing.
        conn.execute("DELETE FROM pending_actions WHERE user_id = ?", (user_id,))
        waiting = conn.changes()
        conn.execute("DELETE FROM user_profiles WHERE user_id = ?", (user_id,))
        profile = conn.changes()
        conn.execute("DELETE FROM extraction_queue WHERE user_id = ?", (user_id,))
        conn.execute("DELETE FROM meta WHERE key = ?", (EXTRACTION_CURSOR_KEY.format(user_id=user_id),))
        cached = _drop_cached_embeddings(conn, hashes)
        # Copies of their words that other parts keep (the raw Telegram updates in the inbox),
        # erased by those parts' own code inside this same transaction.
        erased = {name: erase(conn, user_id) for name, erase in (erasers or {}).items()}
        counts = {
            "messages": messages,
            **erased,
            "memories": memories,
            "sessions": len(empty),
            "tool_executions": tools,
            "approval_requests": waiting,
            "profile": profile,
            "cached_embeddings": cached,
        }
        # What each answer drew on, for /why: ids only, but about this person.
        conn.execute("DELETE FROM answer_sources WHERE user_id = :user OR memory_owner = :user", {"user": user_id})
        conn.execute("DELETE FROM memory_corrections WHERE user_id = ?", (user_id,))
        # The ids let `ash memory history ID` show the deletion; the text is gone with the rows.
        store.audit(conn, actor, "forget_user", user_id, memory_ids=memory_ids, **counts)
    return counts


def resolve_target(
    conn: apsw.Connection, settings: Settings, user_id: str | None, target: int | str, *, include_global: bool = False
) -> knowledge.Knowledge | None:
    """The entry `target` names: an id, or the best word match of a query among the user's entries."""
    if isinstance(target, int) or (isinstance(target, str) and target.strip().lstrip("#").isdigit()):
        entry = knowledge.get(conn, int(str(target).strip().lstrip("#")))
        if entry is None or not _may_delete(entry, user_id, include_global):
            return None
        return entry
    if user_id is None:
        raise ValueError("forgetting by query needs a user id")
    from lib.memory.search import retrieval

    # Words, not meaning: deleting "the closest thing" to a query could delete an unrelated entry.
    found = retrieval.search_knowledge(conn, settings, user_id=user_id, query=str(target), limit=10, mode="fts")
    for result in found:
        entry = knowledge.get(conn, result.id)
        if entry is not None and _may_delete(entry, user_id, include_global):
            return entry
    return None


def _may_delete(entry: knowledge.Knowledge, user_id: str | None, include_global: bool) -> bool:
    if user_id is None or entry.owner_user_id == user_id:
        return True
    return include_global and entry.is_global


def forget_memory(
    conn: apsw.Connection,
    settings: Settings,
    user_id: str | None,
    memory_id_or_query: int | str,
    actor: str,
    *,
    include_global: bool = False,
    hold_until_undo: float | None = None,
) -> dict | None:
    """Delete one entry, the older versions it superseded, and the messages they came from
    (with the answers to them). `user_id` None means any owner (the operator). Returns counts
    and ids (and the forget's `audit_id`), or None when nothing matched. With `hold_until_undo`
    (now, in seconds) what it deletes is held for Undo a while (lib/memory/holds.py)."""
    entry = resolve_target(conn, settings, user_id, memory_id_or_query, include_global=include_global)
    if entry is None:
        return None
    memory_ids = knowledge.chain_ids(conn, entry.id)
    sources = [
        r["source_message_id"]
        for memory_id in memory_ids
        if (r := one(conn, "SELECT source_message_id FROM memories WHERE id = ?", (memory_id,)))
        and r["source_message_id"] is not None
    ]
    found = [one(conn, "SELECT id, session_id FROM messages WHERE id = ?", (message_id,)) for message_id in sources]
    message_ids = _with_answers(conn, [f for f in found if f is not None])
    neighbours = surviving_neighbours(conn, message_ids)
    said = [e.content for memory_id in memory_ids if (e := knowledge.get(conn, memory_id)) is not None]
    with secure_delete(conn, settings), immediate(conn):
        kept = holds.snapshot(conn, memory_ids, message_ids) if hold_until_undo is not None else None
        notes_before = holds.notes_of(conn, entry.owner_user_id)
        memories, messages, hashes = _erase(conn, settings, memory_ids, message_ids, neighbours)
        cached = _drop_cached_embeddings(conn, hashes)
        if entry.owner_user_id is not None:
            # Extraction keeps each fact as a line of the notes too; left there, the forgotten
            # fact would be in the very next prompt.
            for content in said:
                correct.forget_fact_notes(conn, entry.owner_user_id, content, actor)
        result = {
            "memories": memories,
            "messages": messages,
            "cached_embeddings": cached,
            "memory_ids": memory_ids,
            "message_ids": message_ids,
        }
        store.audit(conn, actor, "forget_memory", entry.owner_user_id or "global", **result)
        result["audit_id"] = conn.last_insert_rowid()
        if kept is not None:
            removed = [line for line in notes_before if line not in holds.notes_of(conn, entry.owner_user_id)]
            kept |= {"owner": entry.owner_user_id, "notes_removed": removed}
            holds.hold(conn, result["audit_id"], entry.owner_user_id, kept, hold_until_undo)
    return result


def forget_message(
    conn: apsw.Connection,
    settings: Settings,
    owner: str,
    message_id: int,
    actor: str,
    *,
    hold_until_undo: float | None = None,
) -> dict | None:
    """Delete one past message of `owner`'s memory and the answer that followed it (it repeats
    it), with their index rows, as forgetting an entry does; None when there is no such message.
    `hold_until_undo` as for forget_memory."""
    found = one(conn, "SELECT id, session_id FROM messages WHERE id = ? AND owner_user_id = ?", (message_id, owner))
    if found is None:
        return None
    message_ids = _with_answers(conn, [found])
    neighbours = surviving_neighbours(conn, message_ids)
    with secure_delete(conn, settings), immediate(conn):
        kept = holds.snapshot(conn, [], message_ids) if hold_until_undo is not None else None
        _, messages, hashes = _erase(conn, settings, [], message_ids, neighbours)
        cached = _drop_cached_embeddings(conn, hashes)
        result = {"messages": messages, "cached_embeddings": cached, "message_ids": message_ids}
        store.audit(conn, actor, "forget_message", owner, **result)
        result["audit_id"] = conn.last_insert_rowid()
        if kept is not None:
            holds.hold(conn, result["audit_id"], owner, kept | {"owner": None}, hold_until_undo)
    return result
