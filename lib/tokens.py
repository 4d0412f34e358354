"""Token counts are estimates made offline: about four characters a token.

tiktoken would download its vocabulary on first use (and fails offline); an estimate is
enough to budget a context window, and Ash documents it as one.
"""

CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    """Estimated tokens in `text` (at least 1 for non-empty text)."""
    if not text:
        return 0
    return max(1, (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN)
