"""Hybrid retrieval: FTS5 BM25 and sqlite-vec KNN, fused by their scores, recency-aware.

Fusion (fuse_scores): each ranker's scores are scaled to [0, 1] between its worst and best
candidate, weighted (FTS_WEIGHT, VECTOR_WEIGHT) and summed; a share of the query's own words in
the item itself and a small recency nudge are added on top. Messages are then ranked as parts of
their conversation (lib/memory/search/conversation.py): neighbours share scores, and a named speaker's
turns are preferred.

Every query is scoped to what the asking user may see, inside the SQL (before ranking and
limiting): their own messages; their own knowledge plus entries marked global; never expired
or superseded knowledge. Vectors are partitioned by owner, so a KNN pass never even reads
another user's rows. Results carry the canonical text of the message or entry, not the chunk
(which has context added for ranking).
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import apsw
import numpy as np

from lib.config import Settings
from lib.db import connect, now_iso, rows
from lib.memory.search import conversation, index, relevance, vectors
from lib.memory.search.embeddings import embed_texts, model_key
from lib.memory.types import SearchResult

log = logging.getLogger("ash.memory.retrieval")

MODES = ("hybrid", "fts", "vector")
# Candidates each ranker hands to the fusion (both lists are cut here before fusing).
FTS_CANDIDATES = 50
VECTOR_CANDIDATES = 64
# Weights of the two rankers' scaled scores in the fusion (see fuse_scores).
FTS_WEIGHT = 1.0
VECTOR_WEIGHT = 0.7
OWN_WORDS_WEIGHT = 0.4
STEM_CHARS = 5
# A nudge toward newer items, far smaller than any real score difference: it only
# reorders items of (nearly) equal relevance (SEED 004: "prioritize recent at equal relevance").
RECENCY_WEIGHT = 1e-5
RECENCY_HALF_LIFE_DAYS = 30.0
MAX_QUERY_TERMS = 32
# The KNN of a hybrid search runs on a worker thread with its own connection while the calling
# thread runs the FTS query (sqlite-vec and FTS5 release the GIL); the query is embedded before
# both (see search_messages). At 100k messages: embed ~7 ms, then KNN ~7 ms next to FTS ~5 ms.
PARALLEL = True
PARALLEL_WORKERS = 2
SIDE_DATABASES = 4  # database files with idle second connections kept open (least recently used closed)

STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are aren as at be because been before being below
    between both but by can could couldn did didn do does doesn doing don down during each few for from
    further had hadn has hasn have haven having he her here hers herself him himself his how i if in into
    is isn it its itself just ll me might more most must my myself no nor not now of off on once only or
    other our ours ourselves out over own re s same shan she should so some such t than that the their
    theirs them themselves then there these they this those through to too under until up ve very was
    wasn we were weren what when where which while who whom why will with won would wouldn you your yours
    yourself yourselves d m o y also ever yes yeah oh ok okay hey hi
    """.split()  # noqa: SIM905 - a word list reads better as text
)
_WORD = re.compile(r"\w+")
_UNSET = object()

# CROSS JOIN fixes the join order: the MATCH first, each hit's chunk row by its rowid. Once
# `PRAGMA optimize` has written sqlite_stat1 (every connection runs it), a user owning most chunks
# made the planner walk search_chunks_owner and run the full MATCH once per chunk: 500-900 ms per
# query on a 1,100-turn LoCoMo database instead of ~1 ms.
FTS_MESSAGES_SQL = """
SELECT c.ref_id AS ref_id, bm25(search_fts) AS rank_score
FROM search_fts
CROSS JOIN search_chunks c ON c.id = search_fts.rowid
WHERE search_fts MATCH :q AND c.kind = 'message' AND c.owner_user_id = :owner
ORDER BY rank_score
LIMIT :n
"""
FTS_KNOWLEDGE_SQL = """
SELECT c.ref_id AS ref_id, bm25(search_fts) AS rank_score
FROM search_fts
CROSS JOIN search_chunks c ON c.id = search_fts.rowid
CROSS JOIN memories m ON m.id = c.ref_id
WHERE search_fts MATCH :q AND c.kind = 'memory'
  AND (c.owner_user_id = :owner OR c.owner_user_id IS NULL)
  AND (m.owner_user_id = :owner OR m.is_global = 1)
  AND (:include_superseded OR m.superseded_by IS NULL) AND (m.expires_at IS NULL OR m.expires_at > :now)
ORDER BY rank_score
LIMIT :n
"""
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


def query_terms(text: str) -> list[str]:
    """The content words of free text, once each, in order (at most MAX_QUERY_TERMS)."""
    terms: list[str] = []
    for word in _WORD.findall(text.lower()):
        if word in STOPWORDS or (len(word) < 2 and not word.isdigit()) or word in terms:
            continue
        terms.append(word)
    return terms[:MAX_QUERY_TERMS]


def fts_query(text: str) -> str | None:
    """An FTS5 expression for free text: content words, each quoted, OR-ed (BM25 ranks the overlap)."""
    return relevance.expression(query_terms(text))


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


_pool: ThreadPoolExecutor | None = None
_lock = threading.Lock()
# Idle second connections by database file, most recently used last: a worker borrows one for
# a query and gives it back, so closing them (close_side_connections) never races a query.
_idle: OrderedDict[str, list[apsw.Connection]] = OrderedDict()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=PARALLEL_WORKERS, thread_name_prefix="ash-retrieval")
        return _pool


def _borrow(path: str) -> apsw.Connection:
    with _lock:
        idle = _idle.get(path)
        if idle:
            return idle.pop()
    return connect(path)


def _give_back(path: str, conn: apsw.Connection) -> None:
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


def _side_path(conn: apsw.Connection) -> str | None:
    """The file a second connection may read for `conn`, or None to stay on `conn`: an in-memory
    database has no file, and inside a transaction another connection would miss its writes."""
    if not PARALLEL or conn.in_transaction:
        return None
    path = conn.filename
    return path if path and path != ":memory:" else None


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
    conn = _borrow(path)
    try:
        return _message_vector_hits(conn, settings, user_id, query, query_vector)
    finally:
        _give_back(path, conn)


def _refs(conn: apsw.Connection, hits: list[tuple[int, float]]) -> dict[int, float]:
    """Chunk hits (best first) -> {ref id: score of its best chunk}, best first."""
    if not hits:
        return {}
    ref_of = {r["id"]: r["ref_id"] for r in rows(conn, CHUNK_REFS_SQL, (json.dumps([h[0] for h in hits]),))}
    return _best((ref_of[chunk_id], score) for chunk_id, score in hits if chunk_id in ref_of)


def _best(pairs) -> dict[int, float]:
    """(ref id, score) pairs, best first -> the first (best) score of each ref, order kept."""
    found: dict[int, float] = {}
    for ref, score in pairs:
        found.setdefault(ref, score)
    return found


def _recency(created_at: str, now: datetime) -> float:
    try:
        stamp = datetime.fromisoformat(created_at.replace("Z", "+00:00"))
    except ValueError:
        return 0.0
    age_days = max(0.0, (now - stamp).total_seconds() / 86400)
    return math.exp(-age_days * math.log(2) / RECENCY_HALF_LIFE_DAYS)


def fuse_scores(fts: dict[int, float], vector: dict[int, float]) -> dict[int, float]:
    """Score-aware fusion: each list's scores scaled to [0, 1] by its best, then weighted and summed."""
    scores: dict[int, float] = {}
    for found, weight in ((fts, FTS_WEIGHT), (vector, VECTOR_WEIGHT)):
        if not found:
            continue
        top = max(found.values())
        low = min(found.values()) if len(found) > 1 else 0.0
        span = (top - low) or 1.0
        for ref, score in found.items():
            scores[ref] = scores.get(ref, 0.0) + weight * (score - low) / span
    return scores


def _stems(text: str) -> set[str]:
    return {w[:STEM_CHARS] for w in _WORD.findall(text.lower()) if w not in STOPWORDS}


def own_words(query: str | set[str], text: str) -> float:
    """Share of the query's content words found in `text` itself (a crude prefix stem).
    `query` may be given as its stems already (computed once for all candidates)."""
    wanted = _stems(query) if isinstance(query, str) else query
    return len(wanted & _stems(text)) / len(wanted) if wanted else 0.0


def _fused(
    fts: dict[int, float], vector: dict[int, float], items: dict[int, dict], mode: str, query: str
) -> dict[int, float]:
    """The two rankers' scores fused, plus the share of the query's words in each item itself."""
    fts = fts if mode in ("hybrid", "fts") else {}
    vector = vector if mode in ("hybrid", "vector") else {}
    scores = fuse_scores(fts, vector)
    if mode == "hybrid" and OWN_WORDS_WEIGHT:
        # A chunk carries its neighbours' words; prefer the turn that says it over the "Ok" after it.
        wanted = _stems(query)
        scores = {ref: s + OWN_WORDS_WEIGHT * own_words(wanted, items[ref]["content"]) for ref, s in scores.items()}
    return scores


def _ordered(scores: dict[int, float], items: dict[int, dict]) -> list[tuple[int, float]]:
    """Best first, with the recency nudge deciding near-ties."""
    now = datetime.now(UTC)
    final = {ref: s + RECENCY_WEIGHT * _recency(items[ref]["created_at"], now) for ref, s in scores.items()}
    return sorted(final.items(), key=lambda item: -item[1])


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")


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
    fts: dict[int, float] = {}
    vector_hits: dict[int, float] = {}
    expression = fts_query(query)
    side = _side_path(conn) if expression and mode == "hybrid" else None
    if side and query_vector is _UNSET:
        # The embedding first, on every core (the local models are multi-threaded: beside the
        # full-text query it took 13 ms instead of 7), then the KNN beside the full-text query.
        query_vector = _embed_query(conn, settings, query)
    pending = _executor().submit(_side_vector_hits, side, settings, user_id, query, query_vector) if side else None
    if expression and mode != "vector":
        found = rows(conn, FTS_MESSAGES_SQL, {"q": expression, "owner": user_id, "n": FTS_CANDIDATES})
        fts = _best((r["ref_id"], -r["rank_score"]) for r in found)
    if pending is not None:
        vector_hits = pending.result()
    elif mode != "fts":
        vector_hits = _message_vector_hits(conn, settings, user_id, query, query_vector)
    candidates = list({**fts, **vector_hits})
    if not candidates:
        return []
    allowed = None
    if floor:
        params = {"owner": user_id, "n": FTS_CANDIDATES}
        cosines = _cosines(conn, settings, query, query_vector, "message", fts, vector_hits)
        rare = _rare_matches(conn, FTS_MESSAGES_SQL, params, query, rare_words)
        passed = relevance.relevant(rare, cosines, _cosine_floor(settings))
        if passed is None:
            return []
        allowed = passed | conversation.neighbours(conn, user_id, passed)
    by_id = {r["id"]: r for r in rows(conn, MESSAGES_SQL, (user_id, json.dumps(candidates)))}

    def local(created_at: str) -> datetime | None:
        return index.local_moment(created_at, settings)

    def in_conversation(scores: dict[int, float]) -> dict[int, float]:
        if mode == "hybrid":  # the single rankers stay plain, for comparison
            scores = conversation.spread_to_neighbours(conn, user_id, scores, by_id)
            scores = conversation.prefer_named_speaker(scores, by_id, query)
            scores = conversation.prefer_asked_time(scores, by_id, query, local, datetime.now(UTC).date())
            scores = conversation.prefer_strong_sessions(scores, by_id)
        return _within(scores, allowed)

    return _results(
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


def _within(scores: dict[int, float], allowed: set[int] | None) -> dict[int, float]:
    return scores if allowed is None else {ref: s for ref, s in scores.items() if ref in allowed}


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
        found = rows(conn, FTS_KNOWLEDGE_SQL, {**params, "q": expression})
        fts = _best((r["ref_id"], -r["rank_score"]) for r in found)
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
        rare = _rare_matches(conn, FTS_KNOWLEDGE_SQL, params, query, rare_words)
        allowed = relevance.relevant(rare, cosines, _cosine_floor(settings))
        if allowed is None:
            return []
    by_id = _visible_knowledge(conn, user_id, candidates, include_superseded)
    return _results(
        "knowledge",
        _knowledge_metadata,
        fts,
        vector_hits,
        by_id,
        mode=mode,
        query=query,
        limit=limit,
        adjust=lambda scores: _within(scores, allowed),
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


def _results(
    source_type: str,
    describe: Callable[[dict], dict],
    fts: dict[int, float],
    vector_hits: dict[int, float],
    by_id: dict[int, dict],
    *,
    mode: str,
    query: str,
    limit: int,
    adjust: Callable[[dict[int, float]], dict[int, float]] | None = None,
) -> list[SearchResult]:
    """The candidates `by_id` holds, fused, adjusted (`adjust` may add rows to `by_id`) and cut to
    `limit`; `describe(row)` adds to each one's metadata."""
    # Only ids the canonical table confirms as visible to this user survive (belt and braces).
    fts = {i: s for i, s in fts.items() if i in by_id}
    vector_hits = {i: s for i, s in vector_hits.items() if i in by_id}
    scores = _fused(fts, vector_hits, by_id, mode, query)
    if adjust is not None:
        scores = adjust(scores)
    results = []
    for ref, score in _ordered(scores, by_id)[:limit]:
        row = by_id[ref]
        metadata = {**json.loads(row["metadata"] or "{}"), "created_at": row["created_at"], **describe(row)}
        # Knowledge rows have no token count: their results keep the default.
        results.append(SearchResult(ref, row["content"], score, source_type, metadata, row.get("token_count", 0)))
    return results


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
