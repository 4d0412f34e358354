"""What gets indexed: long texts split into chunks, each message given a little conversational context.

A turn alone is often ambiguous ("Yes, last Friday!"): the chunk of a message carries its
speaker and the end of the turn before it and the start of the turn after it, so both BM25
and the embedding see what the turn was about, and the day it was said, so a question that
names a date finds the turns of that day. Only the message's own text is returned to the
agent; the context is for ranking.
"""

from __future__ import annotations

import re
from datetime import datetime

# ~250 word pieces: all-MiniLM-L6-v2 reads at most 256, anything longer is cut off.
MAX_CHUNK_CHARS = 1000
CHUNK_OVERLAP_CHARS = 150
# How much of each neighbouring turn a message's chunk carries.
CONTEXT_CHARS = 200
# Chunks of one message that get a vector; the rest are searched by their words alone. In an
# assistant chat (BEAM) Ash's answers average 3,800 characters of Markdown and code around the
# user's few facts: embedding every piece cost seconds a turn and filled the nearest neighbours
# of a question with the answers' middles. The opening of an answer says what it is about; the
# start of a long paste says what was pasted. A user's own turns are short (200 characters on
# average), so their limit only matters for a paste.
VECTOR_PIECES = {"user": 2, "assistant": 1}
VECTOR_PIECES_OTHER = 1
# An answer's opening is a chunk of its own, this long at most, so its vector is about what the
# answer is about (and cheap), not a third of its Markdown.
OPENING_CHARS = {"assistant": 400}

_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+|\n+")


def opening(text: str, limit: int) -> tuple[str, str]:
    """(the first sentences of `text` up to `limit` characters, the rest); cut at a space when
    the first sentence is longer."""
    text = text.strip()
    if len(text) <= limit:
        return text, ""
    ends = [m.end() for m in _SENTENCE_END.finditer(text, 0, limit + 1)]
    cut = ends[-1] if ends else (text.rfind(" ", 0, limit) + 1 or limit)
    return text[:cut].strip(), text[cut:].strip()


def split_text(text: str, max_chars: int = MAX_CHUNK_CHARS, overlap: int = CHUNK_OVERLAP_CHARS) -> list[str]:
    """Split `text` into pieces of at most `max_chars`, on sentence boundaries where possible,
    each piece starting with the last `overlap` characters of the one before."""
    text = text.strip()
    if len(text) <= max_chars:
        return [text] if text else []
    sentences = [s for s in _SENTENCE_END.split(text) if s.strip()]
    pieces: list[str] = []
    current = ""
    for sentence in sentences:
        while len(sentence) > max_chars:  # one enormous "sentence": cut it hard
            head, sentence = sentence[:max_chars], sentence[max_chars - overlap :]
            if current:
                pieces.append(current)
                current = ""
            pieces.append(head)
        if current and len(current) + 1 + len(sentence) > max_chars:
            pieces.append(current)
            tail = current[-overlap:]
            current = f"{tail} {sentence}" if len(tail) + 1 + len(sentence) <= max_chars else sentence
        else:
            current = f"{current} {sentence}" if current else sentence
    if current:
        pieces.append(current)
    return pieces


def turn_text(content: str, metadata: dict) -> str:
    """A message's searchable text: its content plus the caption of an image it shared."""
    caption = metadata.get("image_caption")
    return f"{content} [image: {caption}]" if caption else content


def speaker(role: str, metadata: dict) -> str:
    """Who said it: the speaker's name when known, else the role."""
    return str(metadata.get("speaker") or role)


def _head(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + "…"


def _tail(text: str, limit: int) -> str:
    return text if len(text) <= limit else "…" + text[-limit:].split(" ", 1)[-1]


def day_text(moment: datetime) -> str:
    """A date as people write it in a question: "8 May 2023"."""
    return f"{moment.day} {moment:%B %Y}"


def message_chunks(
    label: str,
    text: str,
    before: str | None = None,
    after: str | None = None,
    day: str | None = None,
    times: str = "",
    opening_chars: int | None = None,
) -> list[str]:
    """Chunks of one message: `label: piece`, framed by the neighbouring turns' nearest words,
    headed by the day it was said (when given) and the dates its relative expressions meant
    (`times`, lib/memory/search/when.py: "two weeks ago: 24 April 2023"). With `opening_chars`
    the first piece is the text's opening, at most that long (OPENING_CHARS)."""
    prefix = f"{_tail(before, CONTEXT_CHARS)}\n" if before else ""
    suffix = f"\n{_head(after, CONTEXT_CHARS)}" if after else ""
    head = f"[{'; '.join(filter(None, (day, times)))}] " if day or times else ""
    first, rest = opening(text, opening_chars) if opening_chars else ("", text)
    pieces = [p for p in (first,) if p] + split_text(rest)
    return [f"{head}{prefix}{label}: {piece}{suffix}" for piece in pieces]


def opening_chars(role: str) -> int | None:
    """How long the opening chunk of a message of `role` is (None: no opening chunk of its own)."""
    return OPENING_CHARS.get(role)


def vector_pieces(role: str) -> int:
    """How many of a message's first chunks get a vector (the rest are full-text only)."""
    return VECTOR_PIECES.get(role, VECTOR_PIECES_OTHER)


def memory_chunks(content: str) -> list[str]:
    """Chunks of one knowledge entry."""
    return split_text(content)
