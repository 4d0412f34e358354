"""Fusing the two rankers' candidates into one list, best first.

Each ranker's scores are scaled to [0, 1] between its worst and best candidate, weighted
(FTS_WEIGHT, VECTOR_WEIGHT) and summed; a share of the query's own words in the item itself and
a small recency nudge are added on top.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from lib.memory.search.words import own_words, stems
from lib.memory.types import SearchResult

# Weights of the two rankers' scaled scores in the fusion (see fuse_scores).
FTS_WEIGHT = 1.0
VECTOR_WEIGHT = 0.7
OWN_WORDS_WEIGHT = 0.4
# The own-words share is read in a message's opening, about as long as a turn between people
# (97% of LoCoMo's turns are shorter): a 3,000-character answer of Ash's holds every word of a
# question somewhere in its lists, and outranked the user's short turn that says the fact. Over
# the six BEAM chats R@10 0.596 -> 0.619 (dev 0.575 -> 0.599, held out 0.619 -> 0.640); LoCoMo
# 0.846 either way (docs/memory/retrieval.md).
OWN_WORDS_CHARS = 300
# A nudge toward newer items, far smaller than any real score difference: it only
# reorders items of (nearly) equal relevance (SEED 004: "prioritize recent at equal relevance").
RECENCY_WEIGHT = 1e-5
RECENCY_HALF_LIFE_DAYS = 30.0


def best(pairs: Iterable[tuple[int, float]]) -> dict[int, float]:
    """(ref id, score) pairs, best first -> the first (best) score of each ref, order kept."""
    found: dict[int, float] = {}
    for ref, score in pairs:
        found.setdefault(ref, score)
    return found


def recency(created_at: str, now: datetime) -> float:
    """1 for an item made now, halving every RECENCY_HALF_LIFE_DAYS (0 when the time is unreadable)."""
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


def fused(
    fts: dict[int, float], vector: dict[int, float], items: dict[int, dict], mode: str, query: str
) -> dict[int, float]:
    """The two rankers' scores fused, plus the share of the query's words in each item itself."""
    fts = fts if mode in ("hybrid", "fts") else {}
    vector = vector if mode in ("hybrid", "vector") else {}
    scores = fuse_scores(fts, vector)
    if mode == "hybrid" and OWN_WORDS_WEIGHT:
        # A chunk carries its neighbours' words; prefer the turn that says it over the "Ok" after it.
        wanted = stems(query)
        scores = {
            ref: s + OWN_WORDS_WEIGHT * own_words(wanted, items[ref]["content"][:OWN_WORDS_CHARS])
            for ref, s in scores.items()
        }
    return scores


def ordered(scores: dict[int, float], items: dict[int, dict], limit: int) -> list[tuple[int, float]]:
    """The best `limit`, best first, with the recency nudge deciding near-ties.

    The nudge is at most RECENCY_WEIGHT, so an item further than that below the limit-th score
    cannot reach the list: only the others have their time read (a search scores some 300
    messages, conversation neighbours included, and reading each one's time was 2 ms of it)."""
    if not scores:
        return []
    by_score = sorted(scores.items(), key=lambda item: -item[1])
    cut = by_score[min(limit, len(by_score)) - 1][1] - RECENCY_WEIGHT
    now = datetime.now(UTC)
    final = {ref: s + RECENCY_WEIGHT * recency(items[ref]["created_at"], now) for ref, s in by_score if s >= cut}
    return sorted(final.items(), key=lambda item: -item[1])[:limit]


def within(scores: dict[int, float], allowed: set[int] | None) -> dict[int, float]:
    """Only the scores of `allowed` refs (all of them when None)."""
    return scores if allowed is None else {ref: s for ref, s in scores.items() if ref in allowed}


def results(
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
    scores = fused(fts, vector_hits, by_id, mode, query)
    if adjust is not None:
        scores = adjust(scores)
    found = []
    for ref, score in ordered(scores, by_id, limit):
        row = by_id[ref]
        metadata = {**json.loads(row["metadata"] or "{}"), "created_at": row["created_at"], **describe(row)}
        # Knowledge rows have no token count: their results keep the default.
        found.append(SearchResult(ref, row["content"], score, source_type, metadata, row.get("token_count", 0)))
    return found
