"""The audit trail of memory (seed 001): which entry changed, how, and who or what caused it.

Every write to `memories` records a row through `record`: the actor (`extraction`, `tool:remember`,
`telegram:ID:why`, `admin`, `cli`, `mcp:NAME`, `gc`, ...), the action (`memory_add`,
`memory_supersede`, `memory_reinforce`, `memory_expire`, `memory_evict`, `memory_retire`,
`memory_restore`, `forget_memory`, ...), the owner as target and the entry ids in
`detail.memory_ids`. Rows keep ids, counts, sources and confidences, never the text, so they
outlive a forgotten entry without keeping what it said.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

import apsw

from lib.db import rows
from lib.memory import store

# A row is about an entry when its id is in detail.memory_ids (or the older detail.memory_id).
HISTORY_SQL = """
SELECT id, created_at, actor, action, target, detail FROM audit_log
WHERE json_extract(detail, '$.memory_id') = :id
   OR EXISTS (SELECT 1 FROM json_each(audit_log.detail, '$.memory_ids') WHERE value = :id)
ORDER BY id
"""
LIST_SQL = """
SELECT id, created_at, actor, action, target, detail FROM audit_log
WHERE (:actor IS NULL OR actor = :actor OR actor LIKE :actor || ':%')
  AND (:action IS NULL OR action = :action)
  AND (:target IS NULL OR target = :target)
  AND (:before IS NULL OR id < :before)
  AND (:memory IS NULL OR json_extract(detail, '$.memory_id') = :memory
       OR EXISTS (SELECT 1 FROM json_each(audit_log.detail, '$.memory_ids') WHERE value = :memory))
ORDER BY id DESC LIMIT :limit
"""


@dataclass(frozen=True)
class AuditEntry:
    """One row of the audit log."""

    id: int
    created_at: str
    actor: str
    action: str
    target: str | None
    detail: dict


def _entry(row: dict) -> AuditEntry:
    return AuditEntry(**{**row, "detail": json.loads(row["detail"] or "{}")})


def record(
    conn: apsw.Connection, actor: str, action: str, memory_ids: Iterable[int], owner: str | None, **detail
) -> None:
    """Record a change to entries of `owner` (None: global ones); `detail` must hold no content."""
    store.audit(conn, actor, action, owner or "global", memory_ids=sorted(set(memory_ids)), **detail)


def history(conn: apsw.Connection, memory_id: int) -> list[AuditEntry]:
    """Every recorded change to one entry, oldest first (also after it was forgotten)."""
    return [_entry(r) for r in rows(conn, HISTORY_SQL, {"id": memory_id})]


def entries(
    conn: apsw.Connection,
    *,
    actor: str | None = None,
    action: str | None = None,
    target: str | None = None,
    memory_id: int | None = None,
    before_id: int | None = None,
    limit: int = 100,
) -> list[AuditEntry]:
    """Audit rows newest first, filtered; `actor` also matches its sub-actors (`mcp` finds `mcp:laptop`)."""
    params = {
        "actor": actor,
        "action": action,
        "target": target,
        "memory": memory_id,
        "before": before_id,
        "limit": limit,
    }
    return [_entry(r) for r in rows(conn, LIST_SQL, params)]
