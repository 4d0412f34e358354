"""Memories waiting for their owner: what was written while a turn held outside content.

A `remember` call, an extracted fact or a correction made while the turn held someone else's
words (a web page, a document, a forward, another member's message, a tool's or an MCP server's
output) is stored with status "pending" (lib/memory/knowledge.py): it is not indexed, so no
retrieval brings it into a prompt; an explicit `recall` shows it marked unconfirmed. Its owner
keeps it (it becomes active and indexed) or discards it (kept as a row, never used), through
`/memory pending`, `ash memory pending` or the admin API; unreviewed it is discarded after
`[memory] pending_days`. Every decision is audited (`memory_keep`, `memory_discard`).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import apsw

from lib.config import Settings
from lib.db import immediate, now_iso, one, rows
from lib.memory import audit, knowledge

PENDING_SQL = f"""
SELECT {knowledge.COLUMNS} FROM memories
WHERE status = 'pending' AND (:owner IS NULL OR owner_user_id = :owner)
ORDER BY created_at, id LIMIT :limit
"""
SET_STATUS_SQL = "UPDATE memories SET status = :to, reviewed_at = :now WHERE id = :id AND status = :from"
STALE_SQL = "SELECT id, owner_user_id, is_global FROM memories WHERE status = 'pending' AND created_at <= ? ORDER BY id"
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_MEMBER = re.compile(r"^a message from (.+)$")
_MCP = re.compile(r"^output of the MCP tool (\w+?)__")
_TOOL = re.compile(r"^output of (\w+)$")
_SUFFIXES = (" earlier in this chat", " from memory", " in the summary of this chat")


def origin_of(outside: list[str] | tuple[str, ...]) -> str:
    """The origin a write gets from the outside content its turn held (lib/agent/approval.py names
    it), as "document:NAME", "web", "forward", "member:NAME", "mcp:NAME" or "tool:NAME": the latest
    piece this turn brought (a tool's output comes after the message), else the latest from the
    conversation or memory."""
    current = [name for name in outside if not name.endswith(_SUFFIXES)]
    for raw in [*reversed(current), *reversed(list(outside))]:
        name = raw
        for suffix in _SUFFIXES:
            name = name.removesuffix(suffix)
        if name.startswith("document "):
            return f"document:{name.removeprefix('document ')}"
        if name.startswith("a document from memory ("):
            return f"document:{name.removeprefix('a document from memory (').rstrip(')')}"
        if name in ("a web page", "web search results"):
            return "web"
        if name.startswith("a forwarded") or name == "a message quoted from another chat":
            return "forward"
        if name == "messages from other members of this group":
            return "member"
        if found := _MEMBER.match(name):
            return f"member:{found.group(1)}"
        if found := _MCP.match(name):
            return f"mcp:{found.group(1)}"
        if name == "command output":
            return "tool:bash"
        if found := _TOOL.match(name):
            return f"tool:{found.group(1)}"
    return "outside" if outside else "user"


# Words that carry no fact: a saved sentence may add them ("The user's ...") to what the person said.
_FILLER = frozenset(
    [
        "the",
        "a",
        "an",
        "and",
        "or",
        "of",
        "to",
        "in",
        "on",
        "at",
        "for",
        "with",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "has",
        "have",
        "had",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "user",
        "user's",
        "users",
        "s",
        "they",
        "them",
        "their",
        "he",
        "she",
        "his",
        "her",
        "him",
        "who",
        "which",
        "my",
        "me",
        "i",
        "i'm",
        "im",
        "now",
    ]
)


def in_own_words(content: str, own_words: str) -> bool:
    """Whether every word of `content` that carries meaning is one the person wrote in `own_words`
    (their message this turn): then it is their fact, not outside content's, even if the turn also
    holds some. The same rule the approval step uses for a web search (lib/agent/approval.py)."""
    said = {w.casefold() for w in _WORD.findall(own_words)}
    wanted = {w.casefold() for w in _WORD.findall(content)} - _FILLER
    return bool(wanted) and wanted <= said


def pending(conn: apsw.Connection, owner: str | None = None, *, limit: int = 50) -> list[knowledge.Knowledge]:
    """Entries waiting for review, oldest first: one owner's, or everyone's (owner None)."""
    found = rows(conn, PENDING_SQL, {"owner": owner, "limit": limit})
    return [knowledge.get(conn, r["id"]) for r in found]


def pending_matching(conn: apsw.Connection, owner: str, query: str, *, limit: int = 3) -> list[knowledge.Knowledge]:
    """The owner's pending entries that share a word with `query` (for `recall`, marked unconfirmed)."""
    wanted = {w.casefold() for w in _WORD.findall(query) if len(w) > 2}
    found = [e for e in pending(conn, owner, limit=200) if wanted & {w.casefold() for w in _WORD.findall(e.content)}]
    return found[:limit]


def _decide(
    conn: apsw.Connection, settings: Settings, memory_id: int, to: str, *, actor: str, **because
) -> knowledge.Knowledge | None:
    """Move a pending entry to `to`; None when it is not pending (gone, or decided already)."""
    from lib.memory.search import index

    with immediate(conn):
        conn.execute(SET_STATUS_SQL, {"id": memory_id, "to": to, "from": "pending", "now": now_iso()})
        if not conn.changes():
            return None
        entry = knowledge.get(conn, memory_id)
        if to == "active":
            index.index_memory(conn, settings, memory_id)
        owner = None if entry.is_global else entry.owner_user_id
        action = "memory_keep" if to == "active" else "memory_discard"
        audit.record(conn, actor, action, [memory_id], owner, origin=entry.origin, **because)
    return entry


def keep(conn: apsw.Connection, settings: Settings, memory_id: int, *, actor: str) -> knowledge.Knowledge | None:
    """Keep a pending entry: it becomes active and indexed (audited `memory_keep`)."""
    return _decide(conn, settings, memory_id, "active", actor=actor)


def discard(conn: apsw.Connection, settings: Settings, memory_id: int, *, actor: str) -> knowledge.Knowledge | None:
    """Discard a pending entry: kept as a row, never used (audited `memory_discard`)."""
    return _decide(conn, settings, memory_id, "discarded", actor=actor)


def expire_pending(conn: apsw.Connection, settings: Settings, *, now: datetime | None = None, actor: str = "gc") -> int:
    """Discard entries pending longer than `[memory] pending_days`; returns how many."""
    moment = (now or datetime.now(UTC)) - timedelta(days=settings.config.memory.pending_days)
    cutoff = moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    done = 0
    with immediate(conn):
        for row in rows(conn, STALE_SQL, (cutoff,)):
            if _decide(conn, settings, row["id"], "discarded", actor=actor, reason="unreviewed") is not None:
                done += 1
    return done


def owner_of(conn: apsw.Connection, memory_id: int) -> str | None:
    """Whose memory an entry is (None: gone, or global)."""
    found = one(conn, "SELECT owner_user_id FROM memories WHERE id = ?", (memory_id,))
    return found["owner_user_id"] if found else None
