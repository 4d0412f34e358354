"""Memory garbage collection: expired entries, orphaned index rows, the `max_entries` cap, and
retiring extracted facts that decayed (lib/memory/decay.py).

Value, for eviction under `max_entries` (per owner): superseded entries go first (their newer
version stays), then the lowest confidence, then the oldest. Deleting an entry also deletes
the older versions it superseded, so none of them comes back into retrieval.
"""

from __future__ import annotations

from datetime import datetime

import apsw

from lib.config import Settings
from lib.db import immediate, now_iso, rows
from lib.memory import decay, knowledge, review, store

EXPIRED_SQL = "SELECT id FROM memories WHERE expires_at IS NOT NULL AND expires_at <= ? ORDER BY id"
# Rank each owner's entries from most to least valuable; those past the cap are evicted.
OVER_CAP_SQL = """
SELECT id FROM (
    SELECT id, row_number() OVER (
        PARTITION BY coalesce(owner_user_id, '')
        ORDER BY (superseded_by IS NULL) DESC, confidence DESC, created_at DESC, id DESC
    ) AS rank
    FROM memories
)
WHERE rank > ? ORDER BY id
"""


def _delete_with_history(conn: apsw.Connection, memory_ids: list[int], *, actor: str, action: str) -> int:
    doomed: list[int] = []
    seen: set[int] = set()
    for memory_id in memory_ids:
        for chained in knowledge.chain_ids(conn, memory_id):
            if chained not in seen:
                seen.add(chained)
                doomed.append(chained)
    return knowledge.delete(conn, doomed, actor=actor, action=action)


def _moment(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def collect(conn: apsw.Connection, settings: Settings, *, now: str | None = None, actor: str = "gc") -> dict:
    """Remove expired entries, prune orphaned index rows, enforce `max_entries`; returns counts."""
    from lib.memory.search import index

    now = now or now_iso()
    with immediate(conn):
        expired = _delete_with_history(
            conn, [r["id"] for r in rows(conn, EXPIRED_SQL, (now,))], actor=actor, action="memory_expire"
        )
        cap = settings.config.memory.max_entries
        evicted = 0
        if cap is not None:
            over_cap = [r["id"] for r in rows(conn, OVER_CAP_SQL, (max(cap, 0),))]
            evicted = _delete_with_history(conn, over_cap, actor=actor, action="memory_evict")
        orphans = index.prune_orphans(conn)
        # Facts Ash extracted that nothing confirmed for long enough (lib/memory/decay.py).
        retired = len(decay.retire_decayed(conn, settings, now=now, actor=actor))
        # Memories written with outside content that nobody kept within [memory] pending_days.
        unreviewed = review.expire_pending(conn, settings, now=_moment(now), actor=actor)
        counts = {
            "expired": expired,
            "evicted": evicted,
            "orphans": orphans,
            "retired": retired,
            "unreviewed": unreviewed,
        }
        if expired or evicted or orphans:
            store.audit(conn, actor, "memory_gc", None, **counts)
    return counts
