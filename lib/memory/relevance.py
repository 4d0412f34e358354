"""The relevance floor: what may reach the prompt at all.

Fused scores are relative (each ranker is scaled between its best and worst candidate), so a
search always has a "best" result, even for "thanks!" or "what's 2+2": before the floor every
small-talk message put 20 unrelated memories into the prompt. The floor asks for absolute
evidence instead. An item is relevant when

- it holds a rare word of the query: one found in at most RARE_SHARE of all indexed chunks (or
  in at most RARE_COUNT of them, for a young memory): "haiku" or "Porto", not "good" or
  "thanks", which are in thousands of turns and say nothing about which;
- or its embedding is close to the query's (cosine >= ITEM_COSINE);
- or, for messages, it is the turn just before or after such an item (the "Yes, last Friday!"
  whose words are in the question before it, lib/memory/conversation.py).

A query with no rare word found anywhere and no item at cosine >= QUERY_COSINE pulls in
nothing. Measured with `bench/locomo.py` (LoCoMo dev conversations, each as a populated
memory) and `bench/data/small_talk.txt` (committed before any floor was tried): small talk
20 -> 0.70 items a message, for 0.010 of the evidence that reaches the prompt (0.868 ->
0.858; README, "Relevance floor"). A cosine floor alone (tried first) cut evidence before small
talk: prompt recall 0.871 -> 0.784. Without the neighbour rule: 0.866 -> 0.835.

Document frequencies are counted over every owner's chunks (as BM25's are): a count, never
content, and a term's count is only read up to the threshold, so a common word costs little.
"""

from __future__ import annotations

import apsw

RARE_SHARE = 0.002
RARE_COUNT = 3
ITEM_COSINE = 0.3
QUERY_COSINE = 0.4

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


def expression(terms: list[str]) -> str | None:
    """An FTS5 expression matching any of `terms` (already plain words)."""
    return " OR ".join(f'"{t}"' for t in terms) or None


def relevant(rare_matches: set[int], cosines: dict[int, float]) -> set[int] | None:
    """Items that pass the floor by themselves, or None when the query is about nothing in
    memory (no rare word found, no item close enough)."""
    if not rare_matches and max(cosines.values(), default=0.0) < QUERY_COSINE:
        return None
    return rare_matches | {ref for ref, cosine in cosines.items() if cosine >= ITEM_COSINE}
