"""Keeping the search index in step with the canonical rows: chunks, FTS5 (by trigger) and vectors.

Everything here can be rebuilt from `messages` and `memories` (`reindex_all`). Embeddings are
best effort: when the provider is down a chunk is written without a vector (full-text search
still finds it) and `backfill_vectors` adds the vector later.

`search_chunks.embedded`: 0 waiting for its vector, 1 has one, FULL_TEXT_ONLY (2) never gets one:
the later pieces of a long message are found by their words (chunking.VECTOR_PIECES).
"""

from __future__ import annotations

import json
import logging
import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import apsw

from lib.config import Settings
from lib.db import immediate, rows
from lib.memory.search import chunking, foreground, vectors, when
from lib.memory.search.embeddings import content_hash, embed_texts, model_key

log = logging.getLogger("ash.memory.index")

INDEXED_ROLES = ("user", "assistant")
WAITING, EMBEDDED, FULL_TEXT_ONLY = 0, 1, 2
REINDEX_BATCH = 256

MESSAGES_SQL = """
SELECT id, session_id, owner_user_id, role, content, created_at, metadata
FROM messages WHERE id IN (SELECT value FROM json_each(?))
"""
BEFORE_SQL = """
SELECT role, content, metadata FROM messages
WHERE session_id = ? AND id < ? AND role IN ('user', 'assistant') ORDER BY id DESC LIMIT 1
"""
AFTER_SQL = """
SELECT role, content, metadata FROM messages
WHERE session_id = ? AND id > ? AND role IN ('user', 'assistant') ORDER BY id LIMIT 1
"""
# Retired entries (lib/memory/decay.py) stay out of the index until they are restored; entries
# pending review or discarded (lib/memory/review.py) until they are kept.
MEMORIES_SQL = """
SELECT id, owner_user_id, is_global, content, created_at
FROM memories WHERE id IN (SELECT value FROM json_each(?)) AND retired_at IS NULL AND status = 'active'
"""
INDEXED_MESSAGE_IDS_SQL = "SELECT id FROM messages WHERE role IN ('user', 'assistant') ORDER BY id"
CHUNK_IDS_SQL = "SELECT id FROM search_chunks WHERE kind = ? AND ref_id = ?"
DELETE_CHUNKS_SQL = "DELETE FROM search_chunks WHERE kind = ? AND ref_id = ?"
INSERT_CHUNK_SQL = """
INSERT INTO search_chunks (kind, ref_id, ordinal, owner_user_id, content, content_hash, created_at, embedded)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
"""
UNEMBEDDED_SQL = "SELECT id, kind, owner_user_id, content FROM search_chunks WHERE embedded = 0 ORDER BY id LIMIT ?"
VECTOR_CHUNKS_SQL = "SELECT count(*) FROM search_chunks WHERE embedded != 2"  # FULL_TEXT_ONLY
MARK_EMBEDDED_SQL = "UPDATE search_chunks SET embedded = 1 WHERE id = ? AND embedded = 0"
ORPHAN_CHUNKS_SQL = """
SELECT id FROM search_chunks c WHERE
    (c.kind = 'message' AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = c.ref_id))
    OR (c.kind = 'memory' AND NOT EXISTS (SELECT 1 FROM memories m WHERE m.id = c.ref_id))
"""


@dataclass(frozen=True)
class _Chunk:
    kind: str
    ref_id: int
    ordinal: int
    owner: str | None
    content: str
    created_at: str
    vector: bool = True  # False: found by its words alone (chunking.vector_pieces)


def _vectors_ready(conn: apsw.Connection, settings: Settings) -> bool:
    """True when vectors should be written: embeddings on and the table matches the config."""
    key = model_key(settings)
    if key is None:
        return False
    stored = vectors.stored_model(conn)
    if stored is None:
        vectors.create(conn, *key, replace=vectors.exists(conn))
        return True
    return stored == key


def _label_and_text(row: dict) -> tuple[str, str]:
    metadata = json.loads(row["metadata"] or "{}")
    return chunking.speaker(row["role"], metadata), chunking.turn_text(row["content"], metadata)


def _neighbour(conn: apsw.Connection, sql: str, row: dict) -> str | None:
    found = rows(conn, sql, (row["session_id"], row["id"]))
    if not found:
        return None
    label, text = _label_and_text(found[0])
    return f"{label}: {text}"


def local_moment(created_at: str, settings: Settings) -> datetime | None:
    """When a message was said, in the configured time zone (None for an unreadable stamp)."""
    try:
        moment = datetime.fromisoformat(created_at.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.astimezone(zoneinfo.ZoneInfo(settings.config.timezone))


def _day(moment: datetime | None) -> str | None:
    """The day a message was said ("8 May 2023"): questions name it ("what did I order on 19
    August?"). LoCoMo recall@10 0.747 -> 0.757, recall@5 0.637 -> 0.657."""
    return chunking.day_text(moment) if moment else None


def _message_chunks(
    conn: apsw.Connection, settings: Settings, message_ids: list[int]
) -> tuple[list[int], list[_Chunk]]:
    found = rows(conn, MESSAGES_SQL, (json.dumps(message_ids),))
    chunks = []
    for row in found:
        if row["role"] not in INDEXED_ROLES or not (row["content"] or "").strip():
            continue  # an answer the model left empty is stored as "" and has nothing to find
        label, text = _label_and_text(row)
        before = _neighbour(conn, BEFORE_SQL, row)
        after = _neighbour(conn, AFTER_SQL, row)
        said = local_moment(row["created_at"], settings)
        times = when.annotation(text, said)
        opening = chunking.opening_chars(row["role"])
        pieces = chunking.message_chunks(label, text, before, after, _day(said), times, opening)
        with_vector = chunking.vector_pieces(row["role"])
        chunks += [
            _Chunk("message", row["id"], i, row["owner_user_id"], piece, row["created_at"], i < with_vector)
            for i, piece in enumerate(pieces)
        ]
    return [r["id"] for r in found], chunks


def _memory_chunks(conn: apsw.Connection, memory_ids: list[int]) -> tuple[list[int], list[_Chunk]]:
    found = rows(conn, MEMORIES_SQL, (json.dumps(memory_ids),))
    chunks = []
    for row in found:
        owner = None if row["is_global"] else row["owner_user_id"]
        chunks += [
            _Chunk("memory", row["id"], i, owner, piece, row["created_at"])
            for i, piece in enumerate(chunking.memory_chunks(row["content"]))
        ]
    return [r["id"] for r in found], chunks


def _unindex(conn: apsw.Connection, kind: str, ref_id: int) -> None:
    chunk_ids = [r[0] for r in conn.execute(CHUNK_IDS_SQL, (kind, ref_id))]
    if vectors.exists(conn):
        vectors.delete(conn, chunk_ids)
    conn.execute(DELETE_CHUNKS_SQL, (kind, ref_id))


def _write(
    conn: apsw.Connection,
    settings: Settings,
    kind: str,
    ref_ids: list[int],
    chunks: list[_Chunk],
    *,
    embed: bool = True,
) -> None:
    """Replace the index rows of `ref_ids` with `chunks` (embedded first, outside the write).

    With `embed=False` the chunks are written for full-text search only and `backfill_vectors`
    embeds them later."""
    wanted = [c for c in chunks if c.vector]
    with_vectors = embed and bool(wanted) and _vectors_ready(conn, settings)
    found = embed_texts(conn, settings, [c.content for c in wanted]) if with_vectors else None
    embedded = None if found is None else dict(zip(map(id, wanted), found, strict=True))
    # It reads before it writes: take the write lock first so another process cannot stale it.
    with immediate(conn):
        for ref_id in ref_ids:
            _unindex(conn, kind, ref_id)
        for chunk in chunks:
            state = (EMBEDDED if embedded is not None else WAITING) if chunk.vector else FULL_TEXT_ONLY
            conn.execute(
                INSERT_CHUNK_SQL,
                (
                    chunk.kind,
                    chunk.ref_id,
                    chunk.ordinal,
                    chunk.owner,
                    chunk.content,
                    content_hash(chunk.content),
                    chunk.created_at,
                    state,
                ),
            )
            if state == EMBEDDED:
                vectors.insert(conn, conn.last_insert_rowid(), chunk.owner, chunk.kind, embedded[id(chunk)])


def index_messages(conn: apsw.Connection, settings: Settings, message_ids: list[int], *, embed: bool = True) -> None:
    """Index several messages at once (one embedding call for all their chunks, unless `embed`
    is False: then only full-text rows are written and `backfill_vectors` embeds them later)."""
    found, chunks = _message_chunks(conn, settings, message_ids)
    _write(conn, settings, "message", found, chunks, embed=embed)


def index_message(conn: apsw.Connection, settings: Settings, message_id: int) -> None:
    """(Re)index one message: its chunks, their FTS rows and vectors. A missing id is a no-op."""
    index_messages(conn, settings, [message_id])


def index_memory(conn: apsw.Connection, settings: Settings, memory_id: int) -> None:
    """(Re)index one knowledge entry. A missing id is a no-op."""
    found, chunks = _memory_chunks(conn, [memory_id])
    _write(conn, settings, "memory", found, chunks)


def index_memories(conn: apsw.Connection, settings: Settings, memory_ids: list[int], *, embed: bool = True) -> None:
    """Index several knowledge entries at once (one embedding call for all their chunks, unless
    `embed` is False: then only full-text rows are written and `backfill_vectors` embeds them later)."""
    found, chunks = _memory_chunks(conn, memory_ids)
    _write(conn, settings, "memory", found, chunks, embed=embed)


def unindex(conn: apsw.Connection, kind: str, ref_id: int) -> None:
    """Delete the chunks, FTS rows and vectors of one message or memory (`kind` "message"|"memory")."""
    if kind not in ("message", "memory"):
        raise ValueError(f"kind must be 'message' or 'memory', not {kind!r}")
    with immediate(conn):
        _unindex(conn, kind, ref_id)


def prune_orphans(conn: apsw.Connection) -> int:
    """Remove index rows whose message or memory is gone; returns how many chunks were removed."""
    with immediate(conn):
        orphan_ids = [r[0] for r in conn.execute(ORPHAN_CHUNKS_SQL)]
        if vectors.exists(conn):
            vectors.delete(conn, orphan_ids)
            # Vectors whose chunk row is gone (an interrupted write by an older version).
            known = {r[0] for r in conn.execute("SELECT id FROM search_chunks")}
            stray = [i for i in vectors.ids(conn) if i not in known]
            vectors.delete(conn, stray)
        for chunk_id in orphan_ids:
            conn.execute("DELETE FROM search_chunks WHERE id = ?", (chunk_id,))
    return len(orphan_ids)


def backfill_vectors(
    conn: apsw.Connection, settings: Settings, limit: int = REINDEX_BATCH, *, yield_ceiling: float | None = None
) -> int:
    """Embed up to `limit` chunks that have no vector yet (new turns, or written while the
    embedding service was down); returns how many were embedded. This is background work: it
    embeds a few chunks at a time and steps aside while a question is being answered
    (lib/memory/search/foreground.py; `yield_ceiling` bounds each wait)."""
    if not _vectors_ready(conn, settings):
        return 0
    found = rows(conn, UNEMBEDDED_SQL, (limit,))
    done = 0
    for start in range(0, len(found), foreground.SLICE):
        foreground.step_aside(yield_ceiling)
        piece = found[start : start + foreground.SLICE]
        with foreground.in_background():
            embedded = embed_texts(conn, settings, [r["content"] for r in piece])
        if embedded is None:
            break
        with immediate(conn):
            for row, vector in zip(piece, embedded, strict=True):
                # Another process may have embedded it meanwhile, or the chunk may be gone.
                conn.execute(MARK_EMBEDDED_SQL, (row["id"],))
                if conn.changes():
                    vectors.delete(conn, [row["id"]])
                    vectors.insert(conn, row["id"], row["owner_user_id"], row["kind"], vector)
        done += len(piece)
    return done


def reindex_all(conn: apsw.Connection, settings: Settings, progress: Callable[[int, int], None] | None = None) -> int:
    """Rebuild chunks, FTS and a fresh vec0 table for the configured model from the canonical rows.

    `progress(done, total)` is called after each batch. Returns the number of rows indexed.
    """
    key = model_key(settings)
    with immediate(conn):
        conn.execute("DELETE FROM search_chunks")
        conn.execute("INSERT INTO search_fts (search_fts) VALUES ('rebuild')")
        if key is None:
            vectors.drop(conn)
        else:
            vectors.create(conn, *key, replace=True)
    message_ids = [r[0] for r in conn.execute(INDEXED_MESSAGE_IDS_SQL)]
    memory_ids = [r[0] for r in conn.execute("SELECT id FROM memories ORDER BY id")]
    total = len(message_ids) + len(memory_ids)
    done = 0
    # Background work, also from `ash memory reindex` in a process of its own: its embedding runs
    # at a low priority, so a running server's questions take the cores first.
    with foreground.in_background():
        for start in range(0, len(message_ids), REINDEX_BATCH):
            batch = message_ids[start : start + REINDEX_BATCH]
            index_messages(conn, settings, batch)
            done += len(batch)
            if progress:
                progress(done, total)
        for start in range(0, len(memory_ids), REINDEX_BATCH):
            batch = memory_ids[start : start + REINDEX_BATCH]
            found, chunks = _memory_chunks(conn, batch)
            _write(conn, settings, "memory", found, chunks)
            done += len(batch)
            if progress:
                progress(done, total)
    return total


def index_status(conn: apsw.Connection, settings: Settings) -> dict:
    """What the index holds against what the config asks for, with a hint when they differ."""
    key = model_key(settings)
    stored = vectors.stored_model(conn)
    chunk_count = conn.execute("SELECT count(*) FROM search_chunks").fetchone()[0]
    want_vectors = conn.execute(VECTOR_CHUNKS_SQL).fetchone()[0]
    vector_count = vectors.count(conn)
    status = {
        "configured_model": key[0] if key else None,
        "configured_dimensions": key[1] if key else None,
        "stored_model": stored[0] if stored else None,
        "stored_dimensions": stored[1] if stored else None,
        "messages": conn.execute("SELECT count(*) FROM messages WHERE role IN ('user', 'assistant')").fetchone()[0],
        "memories": conn.execute("SELECT count(*) FROM memories").fetchone()[0],
        "chunks": chunk_count,
        "vectors": vector_count,
        "needs_reindex": False,
        "message": "index is up to date",
    }
    if key is not None and stored is not None and stored != key:
        status["needs_reindex"] = True
        status["message"] = (
            f"the vector index was built with {stored[0]} ({stored[1]} dimensions) but [embeddings] asks for "
            f"{key[0]} ({key[1]}): semantic search is off until you run `ash memory reindex`"
        )
    elif key is not None and vector_count < want_vectors:
        status["message"] = (
            f"{want_vectors - vector_count} chunks have no vector yet (embeddings were unavailable); "
            "they are filled in as the service comes back, or run `ash memory reindex`"
        )
    elif key is None:
        status["message"] = "embeddings are off ([embeddings] provider = 'none'): full-text search only"
    return status
