"""Operational statistics shared by `/admin/stats` and the CLI."""

from __future__ import annotations

from pathlib import Path

import apsw

COUNTED_TABLES = ("sessions", "messages", "memories", "user_profiles", "tool_executions", "usage", "audit_log")

INBOX_BY_STATUS_SQL = "SELECT status, count(*) FROM inbox GROUP BY status"
ACTIVE_MEMORIES_SQL = """
SELECT count(*) FROM memories
WHERE superseded_by IS NULL AND (expires_at IS NULL OR expires_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
"""


def collect_stats(conn: apsw.Connection, db_path: Path) -> dict:
    """Counts per table, active memories, inbox by status, database bytes."""
    # Table names come from the constant tuple above, never from input.
    counts = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in COUNTED_TABLES}
    inbox = {status: n for status, n in conn.execute(INBOX_BY_STATUS_SQL)}
    size = sum(p.stat().st_size for p in db_path.parent.glob(db_path.name + "*") if p.suffix != ".bak")
    return {
        "counts": counts,
        "active_memories": conn.execute(ACTIVE_MEMORIES_SQL).fetchone()[0],
        "inbox": inbox,
        "database_bytes": size,
    }
