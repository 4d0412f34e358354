"""Facts Ash extracted by itself fade when nothing confirms them (seed 001's lesson).

Only entries with source `extraction` decay: what a person asked Ash to remember (the
`remember` tool, MCP, the CLI, the admin API) never does. An extracted fact loses
`[memory] decay_per_week` of confidence for every week since it was stored, last saved again
or last retrieved (`last_reinforced_at`); a fact that was never reinforced is retired by
`ash memory gc` once what is left is at most `retire_below`. Retiring keeps the row (out of
retrieval and listings, its index rows dropped) and is audited; `restore` brings it back, and so
does `ash memory undo`. Consolidation retires a stale fact the same way (`retire`).
"""

from __future__ import annotations

from datetime import datetime

import apsw

from lib.config import Settings
from lib.db import immediate, now_iso, one, rows
from lib.memory import audit, store

WEEK_SECONDS = 7 * 24 * 3600
DECAYING_SQL = """
SELECT id, owner_user_id, confidence, coalesce(last_reinforced_at, created_at) AS since
FROM memories
WHERE source = 'extraction' AND reinforced_count = 0 AND retired_at IS NULL AND superseded_by IS NULL
ORDER BY id
"""
RETIRE_SQL = "UPDATE memories SET retired_at = :now WHERE id = :id AND retired_at IS NULL"
RESTORE_SQL = "UPDATE memories SET retired_at = NULL, last_reinforced_at = :now WHERE id = :id"


def _moment(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def effective_confidence(confidence: float, since: str, settings: Settings, *, now: str | None = None) -> float:
    """What is left of an extracted fact's confidence after the weeks since it was last used."""
    weeks = max(0.0, (_moment(now or now_iso()) - _moment(since)).total_seconds() / WEEK_SECONDS)
    return max(0.0, confidence - settings.config.memory.decay_per_week * weeks)


def retire_decayed(
    conn: apsw.Connection, settings: Settings, *, now: str | None = None, actor: str = "gc"
) -> list[int]:
    """Retire every extracted fact whose confidence has decayed to `retire_below`; returns their ids."""
    from lib.memory.search import index

    now = now or now_iso()
    floor = settings.config.memory.retire_below
    retired = []
    with immediate(conn):
        for row in rows(conn, DECAYING_SQL):
            if effective_confidence(row["confidence"], row["since"], settings, now=now) > floor:
                continue
            index.unindex(conn, "memory", row["id"])
            conn.execute(RETIRE_SQL, {"id": row["id"], "now": now})
            retired.append(row["id"])
        if retired:
            store.audit(conn, actor, "memory_retire", None, memory_ids=retired, count=len(retired))
    return retired


def retire(conn: apsw.Connection, memory_id: int, *, actor: str, **because) -> bool:
    """Take one entry out of retrieval (kept, restorable), audited as `memory_retire` with
    `because`; False when it was retired already."""
    from lib.memory.search import index

    with immediate(conn):
        conn.execute(RETIRE_SQL, {"id": memory_id, "now": now_iso()})
        if not conn.changes():
            return False
        index.unindex(conn, "memory", memory_id)
        found = one(conn, "SELECT owner_user_id, is_global FROM memories WHERE id = ?", (memory_id,))
        owner = None if found["is_global"] else found["owner_user_id"]
        audit.record(conn, actor, "memory_retire", [memory_id], owner, count=1, **because)
    return True


def restore(conn: apsw.Connection, settings: Settings, memory_id: int, *, actor: str) -> bool:
    """Bring a retired entry back into retrieval (its decay clock starts again); False if it was not retired."""
    from lib.memory.search import index

    with immediate(conn):
        found = one(conn, "SELECT owner_user_id FROM memories WHERE id = ? AND retired_at IS NOT NULL", (memory_id,))
        if found is None:
            return False
        conn.execute(RESTORE_SQL, {"id": memory_id, "now": now_iso()})
        index.index_memory(conn, settings, memory_id)
        store.audit(conn, actor, "memory_restore", found["owner_user_id"] or "global", memory_id=memory_id)
    return True
