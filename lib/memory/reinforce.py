"""Saving a fact that is already there strengthens it instead of storing a copy (seed 001).

An entry is "already there" when one of the owner's active entries has the same fingerprint
(the text's words, lower-cased, in order: punctuation and spacing do not count) or is a near
duplicate (the same words give or take a few: Jaccard similarity of the word sets of at least
NEAR_DUPLICATE). Reinforcing raises its confidence by `[memory] reinforcement_rate` of what is
left to 1, counts it, and resets its decay clock (lib/memory/decay.py).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

import apsw

from lib.config import Settings
from lib.db import immediate, now_iso, one, rows
from lib.memory import audit, knowledge, screen

NEAR_DUPLICATE = 0.85
_WORD = re.compile(r"\w+")
CANDIDATES_SQL = f"""
SELECT id, content, confidence FROM memories
WHERE owner_user_id IS :owner AND is_global = :is_global AND {knowledge.ACTIVE_SQL}
ORDER BY id DESC
"""
REINFORCE_SQL = """
UPDATE memories
SET confidence = min(1.0, confidence + :rate * (1.0 - confidence)),
    reinforced_count = reinforced_count + 1, last_reinforced_at = :now,
    expires_at = coalesce(:expires_at, expires_at)
WHERE id = :id
"""
BEFORE_SQL = "SELECT confidence, expires_at, reinforced_count, last_reinforced_at FROM memories WHERE id = ?"
# Retrieval counts as use: an extracted fact that keeps being found does not decay.
TOUCH_SQL = """
UPDATE memories SET last_reinforced_at = :now
WHERE id IN (SELECT value FROM json_each(:ids)) AND source = 'extraction'
"""


@dataclass(frozen=True)
class Saved:
    """Where a save went: a new entry, or an existing one it reinforced."""

    id: int
    reinforced: bool
    # "pending" when it waits for its owner's review (lib/memory/review.py).
    status: str = "active"


def _words(text: str) -> list[str]:
    return _WORD.findall(text.casefold())


def fingerprint(text: str) -> str:
    """The sha256 of the text's words: two saves of one fact share it."""
    return hashlib.sha256(" ".join(_words(text)).encode()).hexdigest()


def similarity(a: str, b: str) -> float:
    """Jaccard similarity of the two texts' word sets (0 to 1)."""
    left, right = set(_words(a)), set(_words(b))
    if not left or not right:
        return 0.0
    return len(left & right) / len(left | right)


def find_duplicate(conn: apsw.Connection, owner: str | None, content: str, *, is_global: bool = False) -> int | None:
    """The id of an active entry of `owner` that says the same as `content`, if any."""
    print_ = fingerprint(content)
    params = {"owner": owner, "is_global": int(is_global), "now": now_iso()}
    best: tuple[float, int] | None = None
    for row in rows(conn, CANDIDATES_SQL, params):
        if fingerprint(row["content"]) == print_:
            return row["id"]
        score = similarity(content, row["content"])
        if score >= NEAR_DUPLICATE and (best is None or score > best[0]):
            best = (score, row["id"])
    return best[1] if best else None


def reinforce(
    conn: apsw.Connection,
    settings: Settings,
    memory_id: int,
    *,
    actor: str,
    expires_at: str | None = None,
    because: dict | None = None,
) -> None:
    """Strengthen an entry that was saved again (a new expiry, when given, replaces the old);
    audited as `memory_reinforce` by `actor`."""
    with immediate(conn):
        # What it was before, so `ash memory undo` can put it back (numbers and times, no text).
        before = one(conn, BEFORE_SQL, (memory_id,))
        conn.execute(
            REINFORCE_SQL,
            {
                "id": memory_id,
                "rate": settings.config.memory.reinforcement_rate,
                "now": now_iso(),
                "expires_at": knowledge.parse_expiry(expires_at),
            },
        )
        found = one(conn, "SELECT owner_user_id, is_global, confidence FROM memories WHERE id = ?", (memory_id,))
        if found is not None:
            owner = None if found["is_global"] else found["owner_user_id"]
            audit.record(
                conn,
                actor,
                "memory_reinforce",
                [memory_id],
                owner,
                confidence=found["confidence"],
                before=before,
                **(because or {}),
            )


def save(
    conn: apsw.Connection,
    settings: Settings,
    content: str,
    *,
    owner_user_id: str | None,
    source: str,
    actor: str | None = None,
    because: dict | None = None,
    expires_at: str | None = None,
    is_global: bool = False,
    **extra,
) -> Saved:
    """Store `content` for its owner, or reinforce the entry that already says it (audited by
    `actor`, default the source, with `because` saying what caused it). A pending write
    (`status="pending"`, lib/memory/review.py) never strengthens an active entry: outside content
    does not get to vouch for what the person said; it is reported as already there."""
    knowledge.parse_expiry(expires_at)  # a bad expiry is refused either way
    status = extra.get("status", "active")
    content = screen.vet(content, outside=status == "pending")
    with immediate(conn):
        found = find_duplicate(conn, owner_user_id, content, is_global=is_global)
        if found is not None and status == "pending":
            return Saved(found, reinforced=False)
        if found is not None:
            reinforce(conn, settings, found, actor=actor or source, expires_at=expires_at, because=because)
            return Saved(found, reinforced=True)
        new_id = knowledge.add(
            conn,
            settings,
            content,
            owner_user_id=owner_user_id,
            is_global=is_global,
            expires_at=expires_at,
            source=source,
            actor=actor,
            because=because,
            **extra,
        )
        return Saved(new_id, reinforced=False, status=status)


def touch(conn: apsw.Connection, memory_ids: list[int]) -> None:
    """Mark entries as just retrieved (resets the decay clock of extracted facts)."""
    if not memory_ids:
        return
    with immediate(conn):
        conn.execute(TOUCH_SQL, {"now": now_iso(), "ids": json.dumps(memory_ids)})
