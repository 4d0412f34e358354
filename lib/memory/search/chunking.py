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

_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+|\n+")


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
) -> list[str]:
    """Chunks of one message: `label: piece`, framed by the neighbouring turns' nearest words,
    headed by the day it was said (when given) and the dates its relative expressions meant
    (`times`, lib/memory/search/when.py: "two weeks ago: 24 April 2023")."""
    prefix = f"{_tail(before, CONTEXT_CHARS)}\n" if before else ""
    suffix = f"\n{_head(after, CONTEXT_CHARS)}" if after else ""
    head = f"[{'; '.join(filter(None, (day, times)))}] " if day or times else ""
    return [f"{head}{prefix}{label}: {piece}{suffix}" for piece in split_text(text)]


def memory_chunks(content: str) -> list[str]:
    """Chunks of one knowledge entry."""
    return split_text(content)
