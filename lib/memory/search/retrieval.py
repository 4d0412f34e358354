"""Hybrid retrieval: FTS5 BM25 and sqlite-vec KNN, fused by their scores (fusion.py), recency-aware.

Messages are then ranked as parts of their conversation (lib/memory/search/conversation.py):
neighbours share scores, and a named speaker's turns are preferred. In a hybrid message search
the KNN runs beside the full-text query, on a connection of its own (parallel.py).

Every query is scoped to what the asking user may see, inside the SQL (before ranking and
limiting): their own messages; their own knowledge plus entries marked global; never expired
or superseded knowledge. Vectors are partitioned by owner, so a KNN pass never even reads
another user's rows. Results carry the canonical text of the message or entry, not the chunk
(which has context added for ranking).
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

import apsw
import numpy as np

from lib.config import Settings
from lib.db import now_iso, rows
from lib.memory.search import asker, conversation, foreground, fulltext, fusion, index, parallel, relevance, vectors
from lib.memory.search.embeddings import embed_texts, model_key
from lib.memory.search.words import fts_query, query_terms
from lib.memory.types import SearchResult

log = logging.getLogger("ash.memory.retrieval")

MODES = ("hybrid", "fts", "vector")
# Candidates each ranker hands to the fusion (both lists are cut here before fusing).
FTS_CANDIDATES = 50
VECTOR_CANDIDATES = 64
_UNSET = object()

REF_CHUNKS_SQL = "SELECT id, ref_id FROM search_chunks WHERE kind = ? AND ref_id IN (SELECT value FROM json_each(?))"
CHUNK_REFS_SQL = "SELECT id, ref_id FROM search_chunks WHERE id IN (SELECT value FROM json_each(?))"
MESSAGES_SQL = """
SELECT id, session_id, role, content, token_count, created_at, metadata
FROM messages WHERE owner_user_id = ? AND id IN (SELECT value FROM json_each(?))
"""
VISIBLE_KNOWLEDGE_SQL = """
SELECT id, content, source, owner_user_id, is_global, subject, confidence, created_at, expires_at,
       superseded_by, metadata
FROM memories
WHERE id IN (SELECT value FROM json_each(:ids))
  AND (owner_user_id = :owner OR is_global = 1)
  AND (:include_superseded OR superseded_by IS NULL)
  AND (expires_at IS NULL OR expires_at > :now)
"""


def _query_vector(conn: apsw.Connection, settings: Settings) -> bool:
    key = model_key(settings)
    if key is None:
        return False
    stored = vectors.stored_model(conn)
    if stored is not None and stored != key:
        log.warning("vector index built for %s, config asks for %s: run `ash memory reindex`", stored, key)
        return False
    return stored is not None


def _embed_query(conn: apsw.Connection, settings: Settings, query: str) -> np.ndarray | None:
    if not _query_vector(conn, settings):
        return None
    embedded = embed_texts(conn, settings, [query], query=True)
    return None if embedded is None else embedded[0]


def _message_vector_hits(
    conn: apsw.Connection, settings: Settings, user_id: str, query: str, query_vector: np.ndarray | object | None
) -> dict[int, float]:
    """The vector side of a message search: embed the query (unless given), KNN in the user's partition."""
    vector = _embed_query(conn, settings, query) if query_vector is _UNSET else query_vector
    if vector is None:
        return {}
    hits = vectors.knn(conn, vector, owner=user_id, kind="message", candidates=VECTOR_CANDIDATES)
    return _refs(conn, hits)


def _side_vector_hits(path: str, settings: Settings, user_id: str, query: str, query_vector) -> dict[int, float]:
    conn = parallel.borrow(path)
    try:
        return _message_vector_hits(conn, settings, user_id, query, query_vector)
    finally:
        parallel.give_back(path, conn)


def _refs(conn: apsw.Connection, hits: list[tuple[int, float]]) -> dict[int, float]:
    """Chunk hits (best first) -> {ref id: score of its best chunk}, best first."""
    if not hits:
        return {}
    ref_of = {r["id"]: r["ref_id"] for r in rows(conn, CHUNK_REFS_SQL, (json.dumps([h[0] for h in hits]),))}
    return fusion.best((ref_of[chunk_id], score) for chunk_id, score in hits if chunk_id in ref_of)


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")


@foreground.while_answering
def search_messages(
    conn: apsw.Connection,
    settings: Settings,
    *,
    user_id: str,
    query: str,
    limit: int = 10,
    mode: str = "hybrid",
    query_vector: np.ndarray | object | None = _UNSET,
    floor: bool = False,
    rare_words: list[str] | None = None,
) -> list[SearchResult]:
    """Past messages of `user_id` relevant to `query`, best first.

    `mode` "fts" or "vector" uses one ranker alone (benchmarks compare them); `query_vector`
    reuses an embedding already computed for this query; `floor` keeps only what passes the
    relevance floor (lib/memory/search/relevance.py), as what goes into a prompt unasked must;
    `rare_words` are the query's rare words when the caller has counted them already.
    """
    _check_mode(mode)
    fts, vector_hits, query_vector = _message_hits(conn, settings, user_id, query, mode, query_vector)
    candidates = list({**fts, **vector_hits})
    if not candidates:
        return []
    allowed = None
    if floor:
        allowed = _messages_past_floor(conn, settings, user_id, query, query_vector, fts, vector_hits, rare_words)
        if allowed is None:
            return []
    by_id = {r["id"]: r for r in rows(conn, MESSAGES_SQL, (user_id, json.dumps(candidates)))}

    def in_conversation(scores: dict[int, float]) -> dict[int, float]:
        if mode == "hybrid":  # the single rankers stay plain, for comparison
            today = datetime.now(UTC).date()
            scores = conversation.rank(conn, user_id, scores, by_id, query, local, today)
            scores = asker.prefer_newest_statement(asker.prefer_askers_turns(scores, by_id, query), by_id, query, today)
        return fusion.within(scores, relevance.with_best(allowed, scores))

    def local(created_at: str) -> datetime | None:
        return index.local_moment(created_at, settings)

    return fusion.results(
        "message",
        _message_metadata,
        fts,
        vector_hits,
        by_id,
        mode=mode,
        query=query,
        limit=limit,
        adjust=in_conversation,
    )


def _message_hits(
    conn: apsw.Connection,
    settings: Settings,
    user_id: str,
    query: str,
    mode: str,
    query_vector: np.ndarray | object | None,
) -> tuple[dict[int, float], dict[int, float], np.ndarray | object | None]:
    """The full-text and the vector candidates of a message search, and the query's vector if it
    was embedded here. In a hybrid search the KNN runs beside the full-text query (parallel.py)."""
    fts: dict[int, float] = {}
    expression = fts_query(query)
    side = parallel.side_path(conn) if expression and mode == "hybrid" else None
    if side and query_vector is _UNSET:
        # The embedding first, on every core (the local models are multi-threaded: beside the
        # full-text query it took 13 ms instead of 7), then the KNN beside the full-text query.
        query_vector = _embed_query(conn, settings, query)
    pending = (
        parallel.executor().submit(_side_vector_hits, side, settings, user_id, query, query_vector) if side else None
    )
    if expression and mode != "vector":
        found = fulltext.message_matches(conn, expression, user_id, FTS_CANDIDATES)
        fts = fusion.best((r["ref_id"], -r["rank_score"]) for r in found)
    if pending is not None:
        return fts, pending.result(), query_vector
    if mode != "fts":
        return fts, _message_vector_hits(conn, settings, user_id, query, query_vector), query_vector
    return fts, {}, query_vector


def _messages_past_floor(
    conn: apsw.Connection,
    settings: Settings,
    user_id: str,
    query: str,
    query_vector: np.ndarray | object | None,
    fts: dict[int, float],
    vector_hits: dict[int, float],
    rare_words: list[str] | None,
) -> set[int] | None:
    """The candidates that pass the relevance floor, with their conversation's neighbours; None
    when none passes."""
    params = {"owner": user_id, "n": FTS_CANDIDATES}
    cosines = _cosines(conn, settings, query, query_vector, "message", fts, vector_hits)
    rare = _rare_matches(conn, fulltext.FTS_MESSAGES_SQL, params, query, rare_words)
    passed = relevance.relevant(rare, cosines, _cosine_floor(settings))
    if passed is None and relevance.about_a_person(conn, query, query_terms(query)):
        passed = set()  # nothing passes by itself; the best KEEP_BEST do (the caller adds them)
    if passed is None:
        return None
    return passed | conversation.neighbours(conn, user_id, passed)


def _rare_matches(conn: apsw.Connection, sql: str, params: dict, query: str, rare_words: list[str] | None) -> set[int]:
    """Items (by `sql`, an FTS query of this module) holding a rare word of `query` (counted here
    unless the caller gives them)."""
    rare = relevance.rare_terms(conn, query_terms(query)) if rare_words is None else rare_words
    expression = relevance.expression(rare)
    return {r["ref_id"] for r in rows(conn, sql, {**params, "q": expression})} if expression else set()


def _cosines(
    conn: apsw.Connection,
    settings: Settings,
    query: str,
    query_vector: np.ndarray | object | None,
    kind: str,
    fts: dict[int, float],
    vector_hits: dict[int, float],
) -> dict[int, float]:
    """Cosine of the query to every candidate: the KNN's own, and for the full-text ones beyond
    its reach, their stored vectors read directly (their best chunk)."""
    missing = [ref for ref in fts if ref not in vector_hits]
    vector = _embed_query(conn, settings, query) if query_vector is _UNSET else query_vector
    if not missing or vector is None:
        return vector_hits
    chunks = rows(conn, REF_CHUNKS_SQL, (kind, json.dumps(missing)))
    similar = vectors.similarities(conn, vector, [c["id"] for c in chunks])
    found = dict(vector_hits)
    for chunk in chunks:
        if chunk["id"] in similar:
            found[chunk["ref_id"]] = max(found.get(chunk["ref_id"], -1.0), similar[chunk["id"]])
    return found


def _cosine_floor(settings: Settings) -> relevance.CosineFloor:
    key = model_key(settings)
    return relevance.cosine_floor(key[0] if key else None)


def _message_metadata(row: dict) -> dict:
    return {"session_id": row["session_id"], "role": row["role"]}


def _visible_knowledge(conn: apsw.Connection, user_id: str, ids: list[int], include_superseded: bool) -> dict:
    found = rows(
        conn,
        VISIBLE_KNOWLEDGE_SQL,
        {"ids": json.dumps(ids), "owner": user_id, "include_superseded": int(include_superseded), "now": now_iso()},
    )
    return {r["id"]: r for r in found}


def _knowledge_vector_hits(
    conn: apsw.Connection, vector: np.ndarray, user_id: str, include_superseded: bool
) -> dict[int, float]:
    """KNN over the user's partition and the global one, dropping entries the user may not see.

    Expiry and supersession live in `memories` and change without reindexing, so the KNN asks
    for more candidates until enough visible ones are found (or the partitions are exhausted).
    """
    candidates = VECTOR_CANDIDATES
    while True:
        hits = vectors.knn(conn, vector, owner=user_id, kind="memory", candidates=candidates)
        hits += vectors.knn(conn, vector, owner=None, kind="memory", candidates=candidates)
        hits.sort(key=lambda h: -h[1])
        refs = _refs(conn, hits)
        visible = _visible_knowledge(conn, user_id, list(refs), include_superseded)
        kept = {r: score for r, score in refs.items() if r in visible}
        if len(kept) >= VECTOR_CANDIDATES or len(hits) < candidates or candidates >= 4096:
            return kept
        candidates *= 4


@foreground.while_answering
def search_knowledge(
    conn: apsw.Connection,
    settings: Settings,
    *,
    user_id: str,
    query: str,
    limit: int = 10,
    include_superseded: bool = False,
    mode: str = "hybrid",
    query_vector: np.ndarray | object | None = _UNSET,
    floor: bool = False,
    rare_words: list[str] | None = None,
) -> list[SearchResult]:
    """Knowledge entries `user_id` may see (own and global; never expired), best first
    (`floor`: only those that pass the relevance floor, lib/memory/search/relevance.py)."""
    _check_mode(mode)
    fts: dict[int, float] = {}
    vector_hits: dict[int, float] = {}
    expression = fts_query(query)
    params = {"owner": user_id, "n": FTS_CANDIDATES, "now": now_iso(), "include_superseded": int(include_superseded)}
    if expression and mode != "vector":
        found = rows(conn, fulltext.FTS_KNOWLEDGE_SQL, {**params, "q": expression})
        fts = fusion.best((r["ref_id"], -r["rank_score"]) for r in found)
    if mode != "fts":
        vector = _embed_query(conn, settings, query) if query_vector is _UNSET else query_vector
        if vector is not None:
            vector_hits = _knowledge_vector_hits(conn, vector, user_id, include_superseded)
    candidates = list({**fts, **vector_hits})
    if not candidates:
        return []
    allowed = None
    if floor:
        cosines = _cosines(conn, settings, query, query_vector, "memory", fts, vector_hits)
        rare = _rare_matches(conn, fulltext.FTS_KNOWLEDGE_SQL, params, query, rare_words)
        allowed = relevance.relevant(rare, cosines, _cosine_floor(settings))
        if allowed is None:
            return []
    by_id = _visible_knowledge(conn, user_id, candidates, include_superseded)
    return fusion.results(
        "knowledge",
        _knowledge_metadata,
        fts,
        vector_hits,
        by_id,
        mode=mode,
        query=query,
        limit=limit,
        adjust=lambda scores: fusion.within(scores, allowed),
    )


def _knowledge_metadata(row: dict) -> dict:
    return {
        "source": row["source"],
        "confidence": row["confidence"],
        "expires_at": row["expires_at"],
        "subject": row["subject"],
        "is_global": bool(row["is_global"]),
        "superseded_by": row["superseded_by"],
    }


@foreground.while_answering
def search_all(
    conn: apsw.Connection, settings: Settings, *, user_id: str, query: str, limit: int = 10, floor: bool = False
) -> list[SearchResult]:
    """Messages and knowledge together, best first (both scored by the same fusion; `floor` as
    in search_messages)."""
    vector = _embed_query(conn, settings, query)  # once for both searches
    # The rare words are counted over the whole index, not per kind: once for both searches too.
    rare = relevance.rare_terms(conn, query_terms(query)) if floor else None
    asked = {
        "user_id": user_id,
        "query": query,
        "limit": limit,
        "query_vector": vector,
        "floor": floor,
        "rare_words": rare,
    }
    found = search_messages(conn, settings, **asked)
    found += search_knowledge(conn, settings, **asked)
    return sorted(found, key=lambda r: -r.score)[:limit]
