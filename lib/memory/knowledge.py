"""Knowledge entries: facts and notes with an owner, a confidence, an optional expiry and a
supersession link (an updated fact keeps the old one, marked and linked, out of retrieval).

Every write keeps the search index in step through `lib.memory.search.index`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import apsw

from lib.config import Settings
from lib.db import immediate, now_iso, one, rows
from lib.memory import audit, screen, store
from lib.memory.standing import standing_instructions

# An entry that is still true: not superseded, not expired, not retired (lib/memory/decay.py).
LIVE_SQL = "superseded_by IS NULL AND (expires_at IS NULL OR expires_at > :now) AND retired_at IS NULL"
# An entry retrieval may return: live, and in use (not pending review, not discarded: m016).
ACTIVE_SQL = f"{LIVE_SQL} AND status = 'active'"
STATUSES = ("active", "pending", "discarded")
# Where an entry came from when its writer does not say (m016 backfills the same way).
SOURCE_ORIGINS = {"extraction": "inference", "admin": "admin", "cli": "cli", "mcp": "mcp", "tool": "user"}

COLUMNS = """id, content, source, owner_user_id, is_global, subject, confidence, created_at, expires_at,
superseded_by, superseded_at, source_message_id, metadata, origin, status"""

INSERT_SQL = """
INSERT INTO memories (id, content, source, owner_user_id, is_global, subject, confidence, created_at, expires_at,
                      source_message_id, metadata, origin, status)
VALUES (:id, :content, :source, :owner, :is_global, :subject, :confidence, :now, :expires_at, :source_message_id,
        :metadata, :origin, :status)
"""
# SQLite hands a deleted highest id to the next row. An entry's id names it in the audit log for
# good (`ash memory history ID`), so ids are never reused: the highest ever given is kept in meta.
HIGH_WATER_KEY = "memories.high_water"
NEXT_ID_SQL = f"""
SELECT max(coalesce((SELECT max(id) FROM memories), 0),
           coalesce((SELECT CAST(value AS INTEGER) FROM meta WHERE key = '{HIGH_WATER_KEY}'), 0)) + 1
"""
SET_HIGH_WATER_SQL = f"""
INSERT INTO meta (key, value) VALUES ('{HIGH_WATER_KEY}', :id)
ON CONFLICT (key) DO UPDATE SET value = excluded.value
"""
GET_SQL = f"SELECT {COLUMNS} FROM memories WHERE id = ?"
LIST_SQL = f"""
SELECT {COLUMNS} FROM memories
WHERE (:owner IS NULL OR owner_user_id = :owner OR (:with_global AND is_global = 1))
  AND (:inactive OR ({LIVE_SQL}))
  AND (status = :status OR (:status IS NULL AND (:inactive OR status = 'active')))
ORDER BY created_at DESC, id DESC
LIMIT :limit OFFSET :offset
"""
SUPERSEDE_SQL = "UPDATE memories SET superseded_by = :new, superseded_at = :now WHERE id = :old AND id != :new"
# The entry and every older version it replaced, directly or through a chain.
CHAIN_SQL = """
WITH RECURSIVE chain(id) AS (
    SELECT :id
    UNION
    SELECT m.id FROM memories m JOIN chain c ON m.superseded_by = c.id
)
SELECT id FROM chain
"""
# A document's sections (lib/memory/documents.py) are what a file said, not facts about the
# person: /memory, extraction and the admin view of a user leave them out.
ACTIVE_FACTS_SQL = f"""
SELECT {COLUMNS} FROM memories
WHERE owner_user_id = :owner AND source != 'document' AND {ACTIVE_SQL}
ORDER BY created_at, id
"""
STATS_SQL = """
SELECT count(*) AS total,
       coalesce(sum(superseded_by IS NULL AND (expires_at IS NULL OR expires_at > :now) AND retired_at IS NULL
                    AND status = 'active'), 0) AS active,
       coalesce(sum(retired_at IS NOT NULL), 0) AS retired,
       coalesce(sum(superseded_by IS NOT NULL), 0) AS superseded,
       coalesce(sum(expires_at IS NOT NULL AND expires_at <= :now), 0) AS expired,
       coalesce(sum(is_global), 0) AS global,
       coalesce(sum(status = 'pending'), 0) AS pending,
       coalesce(sum(status = 'discarded'), 0) AS discarded
FROM memories WHERE (:owner IS NULL OR owner_user_id = :owner)
"""
BY_SOURCE_SQL = """
SELECT source, count(*) AS n FROM memories WHERE (:owner IS NULL OR owner_user_id = :owner)
GROUP BY source ORDER BY n DESC
"""


@dataclass(frozen=True)
class Knowledge:
    """One knowledge entry as stored: what the admin API shows of an entry, as it is."""

    id: int
    content: str
    source: str
    owner_user_id: str | None
    is_global: bool
    subject: str | None
    confidence: float
    created_at: str
    expires_at: str | None
    superseded_by: int | None
    superseded_at: str | None
    source_message_id: int | None
    metadata: dict
    # Neither superseded nor expired when it was read, and in use (status "active").
    active: bool
    # Where it came from ("user", "inference", "document:NAME", "web", "forward", "member:NAME",
    # "tool:NAME", "mcp:NAME", "schedule", "admin", "cli") and its review state (m016).
    origin: str = "user"
    status: str = "active"
    # How well it matched the search that found it; None when it was read, not searched for.
    score: float | None = None

    def found(self, score: float) -> Knowledge:
        """The entry as a search found it, with the search's score."""
        return replace(self, score=score)


def _entry(row: dict) -> Knowledge:
    active = row["superseded_by"] is None and (row["expires_at"] is None or row["expires_at"] > now_iso())
    active = active and row.get("status", "active") == "active"
    return Knowledge(
        **{**row, "is_global": bool(row["is_global"]), "metadata": json.loads(row["metadata"]), "active": active}
    )


_RELATIVE = re.compile(r"^\+?\s*(\d+)\s*(m|min|h|d|w)$", re.IGNORECASE)
_UNITS = {"m": "minutes", "min": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_expiry(text: str | None, *, now: datetime | None = None) -> str | None:
    """An expiry as stored (UTC ISO with Z) from ISO 8601 (`2026-05-01`, `2026-05-01T18:00+02:00`;
    a time without zone is UTC) or a span from now (`30m`, `12h`, `7d`, `2w`). Raises ValueError."""
    if text is None or not text.strip():
        return None
    text = text.strip()
    now = now or datetime.now(UTC)
    relative = _RELATIVE.match(text)
    if relative:
        amount, unit = int(relative.group(1)), relative.group(2).lower()
        moment = now + timedelta(**{_UNITS[unit]: amount})
    else:
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(
                f"expires_at: expected an ISO 8601 date or time (2026-05-01, 2026-05-01T18:00Z) "
                f"or a span such as 12h or 7d, got {text!r}"
            ) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def next_id(conn: apsw.Connection) -> int:
    """The id the next entry gets (call inside the write transaction that inserts it)."""
    memory_id = conn.execute(NEXT_ID_SQL).fetchone()[0]
    conn.execute(SET_HIGH_WATER_SQL, {"id": str(memory_id)})
    return memory_id


def _index():
    # The retrieval engine pulls in the embedding model's code; loaded only when a write needs it.
    from lib.memory.search import index

    return index


def _checked(content: str, status: str, owned: bool, confidence: float) -> str:
    """The entry's text once screened (lib/memory/screen.py); ValueError for what may not be stored."""
    if status not in STATUSES:
        raise ValueError(f"status: expected one of {', '.join(STATUSES)}, got {status!r}")
    content = screen.vet(content, outside=status == "pending").strip()
    if not content:
        raise ValueError("content: a knowledge entry needs some text")
    if not owned:
        raise ValueError("an entry needs an owner (user id) unless it is global")
    if not 0.0 <= confidence <= 1.0:
        raise ValueError(f"confidence: expected a number from 0 to 1, got {confidence}")
    return content


def add(
    conn: apsw.Connection,
    settings: Settings,
    content: str,
    *,
    owner_user_id: str | None,
    is_global: bool = False,
    subject: str | None = None,
    confidence: float = 1.0,
    expires_at: str | None = None,
    source: str = "user",
    source_message_id: int | None = None,
    metadata: dict | None = None,
    actor: str | None = None,
    because: dict | None = None,
    origin: str | None = None,
    status: str = "active",
) -> int:
    """Store a knowledge entry and index it; returns its id. Raises ValueError on bad input, and
    screen.Refused (a ValueError) for a secret or an outside instruction (lib/memory/screen.py).

    `origin` says where it came from (default: what the source implies); a "pending" entry waits
    for its owner's review and is not indexed, so no retrieval finds it (lib/memory/review.py).
    Audited as `memory_add` by `actor` (default: the source), with `because` (ids, never text)
    saying what caused it, e.g. {"asked_by": user id}."""
    content = _checked(content, status, owner_user_id is not None or is_global, confidence)
    params = {
        "content": content,
        "source": source,
        "owner": owner_user_id,
        "is_global": int(is_global),
        "subject": subject,
        "confidence": confidence,
        "now": now_iso(),
        "expires_at": parse_expiry(expires_at),
        "source_message_id": source_message_id,
        "metadata": json.dumps(metadata or {}),
        "origin": origin or SOURCE_ORIGINS.get(source, "user"),
        "status": status,
    }
    with immediate(conn):
        memory_id = params["id"] = next_id(conn)
        conn.execute(INSERT_SQL, params)
        if status == "active":
            _index().index_memory(conn, settings, memory_id)
        audit.record(
            conn,
            actor or source,
            "memory_add",
            [memory_id],
            None if is_global else owner_user_id,
            source=source,
            confidence=confidence,
            expires_at=params["expires_at"],
            source_message_id=source_message_id,
            origin=params["origin"],
            status=status,
            **(because or {}),
        )
    return memory_id


def get(conn: apsw.Connection, memory_id: int) -> Knowledge | None:
    """One entry by id, or None."""
    found = one(conn, GET_SQL, (memory_id,))
    return _entry(found) if found else None


def list_entries(
    conn: apsw.Connection,
    *,
    owner_user_id: str | None = None,
    include_global: bool = False,
    include_inactive: bool = False,
    limit: int = 50,
    offset: int = 0,
    status: str | None = None,
) -> list[Knowledge]:
    """Entries newest first: one owner's (plus global ones if asked) or everyone's (owner None);
    only those with `status` when given (without it: active ones, or every status with inactive)."""
    if status is not None and status not in STATUSES:
        raise ValueError(f"status: expected one of {', '.join(STATUSES)}, got {status!r}")
    params = {
        "status": status,
        "owner": owner_user_id,
        "with_global": int(include_global),
        "inactive": int(include_inactive),
        "now": now_iso(),
        "limit": limit,
        "offset": offset,
    }
    return [_entry(r) for r in rows(conn, LIST_SQL, params)]


def active_facts(conn: apsw.Connection, user_id: str) -> list[Knowledge]:
    """The user's own entries that are neither superseded nor expired, oldest first."""
    return [_entry(r) for r in rows(conn, ACTIVE_FACTS_SQL, {"owner": user_id, "now": now_iso()})]


def chain_ids(conn: apsw.Connection, memory_id: int) -> list[int]:
    """The entry and every older version it superseded."""
    return [r["id"] for r in rows(conn, CHAIN_SQL, {"id": memory_id})]


def delete(conn: apsw.Connection, memory_ids: list[int], *, actor: str, action: str, **because) -> int:
    """Delete entries and their index rows; returns how many rows went. Audited as `action`
    (memory_expire, memory_evict, ...) by `actor`, one row per owner."""
    deleted = 0
    owners: dict[str | None, list[int]] = {}
    with immediate(conn):
        for memory_id in memory_ids:
            found = one(conn, "SELECT owner_user_id, is_global FROM memories WHERE id = ?", (memory_id,))
            _index().unindex(conn, "memory", memory_id)
            conn.execute("DELETE FROM memories WHERE id = ?", (memory_id,))
            deleted += conn.changes()
            if found is not None:
                owners.setdefault(None if found["is_global"] else found["owner_user_id"], []).append(memory_id)
        for owner, ids in owners.items():
            audit.record(conn, actor, action, ids, owner, count=len(ids), **because)
    return deleted


def supersede(conn: apsw.Connection, old_id: int, new_id: int, *, actor: str = "extraction", **because) -> None:
    """Mark `old_id` as replaced by `new_id`: kept, linked, out of retrieval (audited)."""
    with immediate(conn):
        conn.execute(SUPERSEDE_SQL, {"old": old_id, "new": new_id, "now": now_iso()})
        if conn.changes():
            found = one(conn, "SELECT owner_user_id, is_global FROM memories WHERE id = ?", (old_id,))
            owner = None if found is None or found["is_global"] else found["owner_user_id"]
            audit.record(
                conn, actor, "memory_supersede", [old_id, new_id], owner, superseded=old_id, by=new_id, **because
            )
        new = one(conn, "SELECT metadata FROM memories WHERE id = ?", (new_id,))
        if new is not None:
            meta = json.loads(new["metadata"])
            meta["supersedes"] = sorted({*meta.get("supersedes", []), old_id})
            conn.execute("UPDATE memories SET metadata = ? WHERE id = ?", (json.dumps(meta), new_id))


def stats(conn: apsw.Connection, owner_user_id: str | None = None) -> dict:
    """Counts of entries: total, active, superseded, expired, global, by source."""
    params = {"owner": owner_user_id, "now": now_iso()}
    counts = one(conn, STATS_SQL, params) or {}
    counts["by_source"] = {r["source"]: r["n"] for r in rows(conn, BY_SOURCE_SQL, params)}
    return counts


def _as_said(line: str) -> str:
    """A note line or a fact as words (case, spacing and a list dash aside), for telling the same one apart."""
    return " ".join(line.strip().removeprefix("- ").split()).casefold()


def describe_user(conn: apsw.Connection, settings: Settings, user_id: str) -> str:
    """What Ash knows about a person, as plain text: profile notes, active facts (each once) and
    the standing instructions every prompt of theirs carries (lib/memory/standing.py).

    Extraction keeps a fact both as an entry and as a line of the notes: the line is left out of
    Notes, and the fact listed under Facts with its number (what /forget needs)."""
    profile = store.get_profile(conn, user_id)
    facts = active_facts(conn, user_id)
    parts = []
    known = {_as_said(fact.content) for fact in facts}
    notes = [line for line in (profile.notes if profile else "").splitlines() if _as_said(line) not in known]
    if "\n".join(notes).strip():
        parts.append("Notes:\n" + "\n".join(notes).strip())
    if facts:
        lines = []
        for fact in facts:
            until = f" (until {fact.expires_at[:16].replace('T', ' ')} UTC)" if fact.expires_at else ""
            lines.append(f"#{fact.id} {fact.content}{until}")
        parts.append("Facts:\n" + "\n".join(lines))
    given = standing_instructions(conn, user_id)
    if given:
        lines = [f"- {item.metadata['created_at'][:10]}: {item.content}" for item in given]
        parts.append(
            "Standing instructions (I follow these in every answer; /why after an answer lets you forget one):\n"
            + "\n".join(lines)
        )
    if not parts:
        return "I don't know anything about you yet."
    return "\n\n".join(parts)
