"""A query's words: the content words that go into the full-text query, and a crude stem for
telling how many of them an item says itself."""

from __future__ import annotations

import re

from lib.memory.search import relevance

MAX_QUERY_TERMS = 32
STEM_CHARS = 5

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
WORD = re.compile(r"\w+")


def query_terms(text: str) -> list[str]:
    """The content words of free text, once each, in order (at most MAX_QUERY_TERMS)."""
    terms: list[str] = []
    for word in WORD.findall(text.lower()):
        if word in STOPWORDS or (len(word) < 2 and not word.isdigit()) or word in terms:
            continue
        terms.append(word)
    return terms[:MAX_QUERY_TERMS]


def fts_query(text: str) -> str | None:
    """An FTS5 expression for free text: content words, each quoted, OR-ed (BM25 ranks the overlap)."""
    return relevance.expression(query_terms(text))


def stems(text: str) -> set[str]:
    """The content words of `text`, each cut to its first STEM_CHARS characters."""
    return {w[:STEM_CHARS] for w in WORD.findall(text.lower()) if w not in STOPWORDS}


def own_words(query: str | set[str], text: str) -> float:
    """Share of the query's content words found in `text` itself (a crude prefix stem).
    `query` may be given as its stems already (computed once for all candidates)."""
    wanted = stems(query) if isinstance(query, str) else query
    return len(wanted & stems(text)) / len(wanted) if wanted else 0.0
