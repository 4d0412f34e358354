"""Documents kept as knowledge: a file's text in short sections that each name the file (and the
page), owned by the memory of the chat it was sent in (lib/memory/scope.py).

Sections rather than one entry for the whole file: retrieval returns an entry's whole text
within a token budget ([memory] retrieval_token_budget), so a fact on page 3 must live in an
entry the size of a chunk. Each section is one knowledge entry (source "document") whose
metadata marks it as outside content ({"untrusted": true, "file": NAME}); retrieval hands that
metadata on with every result, so a turn that retrieves it knows it holds untrusted content.

The same file sent again (the same Telegram file_unique_id, or the same bytes) replaces the
sections it had rather than adding a second copy. Forgetting needs nothing special: the
sections are the owner's entries, so /forget and `forget_memory` delete them with the rest.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

import apsw

from lib.config import Settings
from lib.db import immediate, now_iso, rows
from lib.memory import audit, knowledge, screen
from lib.memory.search import chunking, index

SOURCE = "document"
# A section's text, its header ("[report.pdf, page 3] ") included, fits one index chunk.
SECTION_CHARS = chunking.MAX_CHUNK_CHARS
SAME_FILE_SQL = """
SELECT id FROM memories
WHERE owner_user_id = :owner AND source = 'document'
  AND ((:file_id != '' AND json_extract(metadata, '$.file_unique_id') = :file_id)
       OR json_extract(metadata, '$.sha256') = :sha256)
"""


def content_sha256(data: bytes) -> str:
    """The hash a document's bytes are recognised by when sent again."""
    return hashlib.sha256(data).hexdigest()


def sections_of(name: str, parts: Sequence[tuple[str | None, str]], max_chars: int) -> list[tuple[str | None, str]]:
    """(label, text) of each section: the parts (pages) split to fit a chunk, each text headed by
    the file's name and the part's label, at most `max_chars` of the document in all."""
    found = []
    left = max_chars
    for label, text in parts:
        if left <= 0:
            break
        text = text.strip()[:left]
        left -= len(text)
        header = f"[{name}, {label}] " if label else f"[{name}] "
        for piece in chunking.split_text(text, max_chars=SECTION_CHARS - len(header)):
            found.append((label, header + piece))
    return found


def keep_document(
    conn: apsw.Connection,
    settings: Settings,
    *,
    owner: str,
    name: str,
    parts: Sequence[tuple[str | None, str]],
    sha256: str,
    file_unique_id: str = "",
    sent_by: str | None = None,
    pages: int | None = None,
    max_chars: int,
    embed: bool = True,
) -> list[int]:
    """Keep a document's text (`parts`: (label such as "page 3" or None, text), at most
    `max_chars` of it) in `owner`'s memory, replacing an earlier copy of the same file; returns
    the new entries' ids.

    The entries and their full-text rows are written in one transaction. With `embed` their
    vectors follow at once; without, the memory service's next pass embeds them, as it does a
    turn's messages (lib/memory/service.py)."""
    sections = sections_of(name, parts, max_chars)
    if not sections:
        return []
    stamp = now_iso()
    ids: list[int] = []
    with immediate(conn):
        same_file = {"owner": owner, "file_id": file_unique_id, "sha256": sha256}
        # A file sent again replaces its earlier copy.
        knowledge.delete(
            conn,
            [r["id"] for r in rows(conn, SAME_FILE_SQL, same_file)],
            actor=_actor(sent_by),
            action="memory_replace",
        )
        for number, (label, text) in enumerate(sections, start=1):
            metadata = {
                "file": name,
                "untrusted": True,
                "sha256": sha256,
                "file_unique_id": file_unique_id,
                "section": number,
                "sections": len(sections),
                **({"part": label} if label else {}),
                **({"pages": pages} if pages is not None else {}),
                **({"sent_by": sent_by} if sent_by is not None else {}),
            }
            conn.execute(knowledge.INSERT_SQL, _section_row(conn, owner, name, text, metadata, stamp))
            ids.append(conn.last_insert_rowid())
        index.index_memories(conn, settings, ids, embed=False)
        audit.record(conn, _actor(sent_by), "memory_add", ids, owner, source=SOURCE, sections=len(ids))
    if embed:
        index.index_memories(conn, settings, ids)
    return ids


def _section_row(conn: apsw.Connection, owner: str, name: str, text: str, metadata: dict, stamp: str) -> dict:
    """One section as a knowledge row: the file's name is its subject, its confidence whole."""
    return {
        "id": knowledge.next_id(conn),
        # Invisible and direction-control characters go (lib/memory/screen.py); a document's
        # sections are what the file said, marked untrusted, so they are stored as they are.
        "content": screen.clean(text),
        "source": SOURCE,
        "owner": owner,
        "is_global": 0,
        "subject": name,
        "confidence": 1.0,
        "now": stamp,
        "expires_at": None,
        "source_message_id": None,
        "metadata": json.dumps(metadata),
        "origin": f"document:{name}",
        "status": "active",
    }


def _actor(sent_by: str | None) -> str:
    """Who put a document into memory: the person who sent it, in the audit log."""
    return f"document:{sent_by}" if sent_by else "document"
