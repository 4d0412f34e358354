"""The relevance floor: what may reach the prompt at all.

Fused scores are relative (each ranker is scaled between its best and worst candidate), so a
search always has a "best" result, even for "thanks!" or "what's 2+2": before the floor every
small-talk message put 20 unrelated memories into the prompt. The floor asks for absolute
evidence instead. An item is relevant when

- it holds a rare word of the query: one found in at most RARE_SHARE of all indexed chunks (or
  in at most RARE_COUNT of them, for a young memory): "haiku" or "Porto", not "good" or
  "thanks", which are in thousands of turns and say nothing about which;
- or its embedding is close to the query's (cosine >= the model's `item` floor);
- or, for messages, it is the turn just before or after such an item (the "Yes, last Friday!"
  whose words are in the question before it, lib/memory/search/conversation.py).

A query with no rare word found anywhere and no item at cosine >= the model's `query` floor
pulls in nothing. Each embedding model has its own scale: MiniLM's and OpenAI's cosines spread
from about 0 to 0.6 for unrelated to related chat turns; multilingual-e5-small's raw ones sit
between 0.75 and 0.9 for any two, and once centred (lib/memory/search/e5.py) they spread again on a
scale of their own, so the floors are set per model (COSINE_FLOORS).

Measured with `bench/locomo.py` (LoCoMo dev conversations, each as a populated memory) and
`bench/data/small_talk.txt` (committed before any floor was tried), with MiniLM: small talk 20 ->
0.70 items a message, for 0.010 of the evidence that reaches the prompt (0.868 -> 0.858;
docs/memory/retrieval.md). A cosine floor alone (tried first) cut evidence before small talk: prompt
recall 0.871 -> 0.784. Without the neighbour rule: 0.866 -> 0.835.
With multilingual-e5-small's centred vectors (lib/memory/search/e5.py), on the three tuning
conversations: floors (0.3, 0.4) let 2.58 small-talk items a message through (prompt recall
0.872), (0.35, 0.45) 0.85 (0.848), (0.4, 0.45) 0.67 (0.843), (0.35, 0.5) 0.39 (0.740).

Document frequencies are counted over every owner's chunks (as BM25's are): a count, never
content, and a term's count is only read up to the threshold, so a common word costs little.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import apsw

RARE_SHARE = 0.002
RARE_COUNT = 3
# Once a question is about something in memory, the best this many messages pass as they are.
# The floor's rare words and cosines were set on LoCoMo's short turns; in assistant chats (BEAM)
# the user's words ("budget", "Ultraboost") are in dozens of Ash's answers, so not rare, and a
# long chunk's cosine is low: the floor kept 0.384 of the evidence where the hybrid top 10 held
# 0.487. What reaches the prompt must hold at least what the top 10 holds.
KEEP_BEST = 10


# A question about a person memory knows passes the floor when it names at least PERSONAL_TERMS
# words memory holds, though none is rare and no vector is close. The person is the asker ("Can
# you help me organize my tasks so I can share them?") or someone named ("Who supports Caroline
# when she has a negative experience?"). In assistant chats the asker's words ("tasks",
# "budget") are in dozens of Ash's answers, and long turns keep cosines low; in a conversation
# between people each name is in hundreds of turns. Every question whose evidence the hybrid top
# 10 held and the prompt did not (4 on BEAM, 7 on LoCoMo, over six conversations) was of this
# kind, with the floor letting nothing through. "I", "my", "mine", "myself" and names only: "tell
# me a joke" and "give me a random number" are small talk.
PERSONAL_TERMS = 3
_ASKER_OWN = re.compile(r"(?<![\w'])(?:I(?:'m|'ve|'d|'ll)?|(?i:my|mine|myself))(?![\w'])")
# A capitalised word after the first one: a name ("Caroline", "Tim's"), as a question says it.
_NAME = re.compile(r"(?<=\s)[\"'“(]?([A-Z][a-z]+)")


class CosineFloor(NamedTuple):
    item: float  # an item this close to the query passes by itself
    query: float  # without a rare word, nothing passes unless some item is this close


# By the model key of lib.memory.search.embeddings.model_key; any other model gets DEFAULT_FLOOR.
DEFAULT_FLOOR = CosineFloor(item=0.3, query=0.4)
COSINE_FLOORS = {"local:multilingual-e5-small": CosineFloor(item=0.35, query=0.45)}


def cosine_floor(model: str | None) -> CosineFloor:
    return COSINE_FLOORS.get(model or "", DEFAULT_FLOOR)


# Counting stops one past the threshold: only "rare or not" matters, and a word in half of
# 100k chunks would otherwise be counted in full.
TERM_COUNT_SQL = "SELECT count(*) FROM (SELECT 1 FROM search_fts WHERE search_fts MATCH ? LIMIT ?)"
# The highest chunk id stands in for the number of chunks (O(log n), where count(*) reads the
# index): deleted chunks make it an overestimate, which only makes the floor a little kinder.
CHUNKS_SQL = "SELECT coalesce(max(id), 0) FROM search_chunks"


def rare_terms(conn: apsw.Connection, terms: list[str]) -> list[str]:
    """The query terms found in at least one chunk and in at most the rare share of them."""
    if not terms:
        return []
    chunks = conn.execute(CHUNKS_SQL).fetchone()[0]
    threshold = max(RARE_COUNT, int(RARE_SHARE * chunks))
    rare = []
    for term in terms:
        found = conn.execute(TERM_COUNT_SQL, (f'"{term}"', threshold + 1)).fetchone()[0]
        if 0 < found <= threshold:
            rare.append(term)
    return rare


def about_a_person(conn: apsw.Connection, query: str, terms: list[str]) -> bool:
    """The query speaks of the asker ("I", "my") or names someone, and names at least
    PERSONAL_TERMS words found in memory (each looked up once, counting stops at one)."""
    if not _ASKER_OWN.search(query) and not _NAME.search(query):
        return False
    known = 0
    for term in terms:
        known += conn.execute(TERM_COUNT_SQL, (f'"{term}"', 1)).fetchone()[0]
        if known >= PERSONAL_TERMS:
            return True
    return False


def expression(terms: list[str]) -> str | None:
    """An FTS5 expression matching any of `terms` (already plain words)."""
    return " OR ".join(f'"{t}"' for t in terms) or None


def with_best(allowed: set[int] | None, scores: dict[int, float]) -> set[int] | None:
    """`allowed` (items past the floor) plus the KEEP_BEST best of `scores` (None stays None: no floor)."""
    if allowed is None:
        return None
    return allowed | set(sorted(scores, key=lambda ref: -scores[ref])[:KEEP_BEST])


def relevant(rare_matches: set[int], cosines: dict[int, float], floor: CosineFloor = DEFAULT_FLOOR) -> set[int] | None:
    """Items that pass the floor by themselves, or None when the query is about nothing in
    memory (no rare word found, no item close enough)."""
    if not rare_matches and max(cosines.values(), default=0.0) < floor.query:
        return None
    return rare_matches | {ref for ref, cosine in cosines.items() if cosine >= floor.item}
