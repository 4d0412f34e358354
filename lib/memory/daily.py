"""When the memory service's daily pass runs (review expiry, consolidation), and who hears of it.

The pass runs in the owner's quiet hour: QUIET_HOUR local time in their zone (their `/timezone`,
else `timezone` in config.toml), once the last pass is at least SOON old, so the model calls it
may make compete with nobody's turns. A server that is never up at that hour (Fly stops idle
machines) runs it whenever it is up once the last pass is OVERDUE; a database that never had a
pass runs one at once. The time of the last pass is kept in the database, so a restart neither
repeats it nor puts it off.

Consolidation's new proposals are announced to whoever may review them: a person's own to that
person, a group's and the global ones to the owner (lib/conversation/pending.py decides the same).
An announcement waits here (`meta`, ANNOUNCE_KEY) until the channel takes it outside the
reviewer's quiet hours (lib/telegram/review_message.py), in the same transaction that queues the
message: it is sent once.
"""

from __future__ import annotations

import zoneinfo
from datetime import UTC, datetime

import apsw

from lib.config import Settings
from lib.db import immediate, one, rows
from lib.memory import store

QUIET_HOUR = 4
SOON = 20 * 3600.0
OVERDUE = 48 * 3600.0
LAST_KEY = "memory.daily.last"
ANNOUNCE_KEY = "memory.review.{user_id}"
ANNOUNCE_PREFIX = "memory.review."
NEW_PROPOSALS_SQL = "SELECT id, owner_user_id FROM memory_proposals WHERE status = 'open' AND id > ? ORDER BY id"


def owner_zone(conn: apsw.Connection, settings: Settings) -> zoneinfo.ZoneInfo:
    """The owner's zone: their `/timezone`, else config.toml's `timezone`, else UTC."""
    owner = settings.config.owner
    profile = store.get_profile(conn, str(owner)) if owner is not None else None
    for name in (profile.timezone if profile else None, settings.config.timezone):
        try:
            return zoneinfo.ZoneInfo(name) if name else zoneinfo.ZoneInfo("UTC")
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            continue
    return zoneinfo.ZoneInfo("UTC")


def last_pass(conn: apsw.Connection) -> float | None:
    found = one(conn, "SELECT value FROM meta WHERE key = ?", (LAST_KEY,))
    return float(found["value"]) if found else None


def is_due(conn: apsw.Connection, settings: Settings, now: float) -> bool:
    """Whether the daily pass should run at `now` (seconds since the epoch)."""
    last = last_pass(conn)
    if last is None:
        return True
    quiet = datetime.fromtimestamp(now, UTC).astimezone(owner_zone(conn, settings)).hour == QUIET_HOUR
    return now - last >= OVERDUE or (now - last >= SOON and quiet)


def mark_done(conn: apsw.Connection, now: float) -> None:
    with immediate(conn):
        conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (LAST_KEY, repr(now)))


def newest_proposal(conn: apsw.Connection) -> int:
    found = one(conn, "SELECT coalesce(max(id), 0) AS n FROM memory_proposals")
    return int(found["n"])


def to_announce(conn: apsw.Connection, settings: Settings, after: int) -> dict[str, int]:
    """Who should hear of the open proposals made after proposal `after`: {user id: the newest
    proposal id among theirs} (that id names the announcement, so it is queued once)."""
    owner = str(settings.config.owner) if settings.config.owner is not None else None
    found: dict[str, int] = {}
    for proposal in rows(conn, NEW_PROPOSALS_SQL, (after,)):
        who = proposal["owner_user_id"]
        reviewer = who if who is not None and not who.startswith("chat:") else owner
        if reviewer is not None:
            found[reviewer] = max(found.get(reviewer, 0), proposal["id"])
    return found


def note_announcements(conn: apsw.Connection, fresh: dict[str, int]) -> None:
    """Keep `fresh` ({user id: newest proposal id}) until the channel announces it."""
    with immediate(conn):
        for user_id, newest in fresh.items():
            conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                (ANNOUNCE_KEY.format(user_id=user_id), str(newest)),
            )


def announcements(conn: apsw.Connection) -> dict[str, int]:
    """The announcements waiting: {user id: newest proposal id}."""
    found = rows(conn, "SELECT key, value FROM meta WHERE key >= ? AND key < ?", (ANNOUNCE_PREFIX, "memory.review/"))
    return {r["key"].removeprefix(ANNOUNCE_PREFIX): int(r["value"]) for r in found}


def announced(conn: apsw.Connection, user_id: str) -> None:
    """The announcement to `user_id` was queued: call inside the transaction that queued it."""
    conn.execute("DELETE FROM meta WHERE key = ?", (ANNOUNCE_KEY.format(user_id=user_id),))
