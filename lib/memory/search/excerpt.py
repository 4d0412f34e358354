"""What of a long message goes into a prompt: the part that matches the question.

An answer of Ash's in an assistant chat averages 3,800 characters (BEAM), some 950 tokens, so
the retrieval budget (2,000 tokens) held two of them and dropped the rest of the top 10, and the
prompt recalled less than the search had found. A message longer than EXCERPT_CHARS is shown
as its piece that holds most of the question's words (the first such piece on a tie), marked
with "…" where text was left out.
"""

from __future__ import annotations

import dataclasses

from lib.memory.search.chunking import split_text
from lib.memory.search.words import own_words, stems
from lib.memory.types import SearchResult
from lib.tokens import estimate_tokens

EXCERPT_CHARS = 600
EXCERPT_OVERLAP = 100


def excerpt(text: str, query: str, limit: int = EXCERPT_CHARS) -> str:
    """`text` itself when short, else its piece of at most `limit` characters that best matches `query`."""
    if len(text) <= limit:
        return text
    pieces = split_text(text, limit, EXCERPT_OVERLAP)
    wanted = stems(query)
    best = max(range(len(pieces)), key=lambda i: (own_words(wanted, pieces[i]), -i))
    return ("…" if best > 0 else "") + pieces[best] + ("…" if best < len(pieces) - 1 else "")


def shortened(result: SearchResult, query: str) -> SearchResult:
    """A message result with its content cut to its excerpt (knowledge and short messages as they are)."""
    if result.source_type != "message" or len(result.content) <= EXCERPT_CHARS:
        return result
    content = excerpt(result.content, query)
    metadata = {**result.metadata, "excerpt": True}
    return dataclasses.replace(result, content=content, token_count=estimate_tokens(content), metadata=metadata)
