"""What a restored database takes over from the live one before it replaces it.

A restore brings back an earlier state; three things must not go back with it:

- the inbox: updates the live server acknowledged to Telegram and has not answered yet would be
  lost (Telegram never sends them again), and without the recent done keys a late duplicate
  delivery would be answered twice. So every live inbox row is carried over (claims released),
  and the backup's own open rows, answered since, are closed rather than answered again;
- forgetting: a person forgotten after the restored point must stay forgotten. The live audit
  log's forgets the restored file does not have are applied again, and their records kept;
- schedules: tasks whose time passed in between ran on the live server (or are past), so they
  move on to their next time without a catch-up run.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path

import apsw

from lib.backup import RestoreResult, restore_from
from lib.config import Settings
from lib.db import connect, immediate, now_iso, rows, stamp
from lib.inbox import queue
from lib.memory import forget
from lib.replica.litestream import ReplicaError, clean_output, restore
from lib.replica.target import replica_of
from lib.schedule import store as schedules
from lib.schedule.plan import plan_job

LIVE_INBOX_SQL = "SELECT * FROM inbox"
CLOSE_OPEN_SQL = """
UPDATE inbox SET status = 'skipped', claimed_by = NULL, lease_until = NULL, done_at = ?,
    last_error = 'restored from a backup: answered before the restore'
WHERE status IN ('pending', 'claimed')
"""
FORGETS_SQL = """
SELECT created_at, actor, action, target, detail FROM audit_log
WHERE action IN ('forget_user', 'forget_memory') ORDER BY id
"""
INSERT_AUDIT_SQL = "INSERT INTO audit_log (created_at, actor, action, target, detail) VALUES (?, ?, ?, ?, ?)"
# Who the audit log names for a forget applied again by a restore.
RESTORE_ACTOR = "restore"


def carry_inbox(live: apsw.Connection, restored: apsw.Connection) -> int:
    """Close the restored file's open rows, then copy every live inbox row over; returns how many
    open (acknowledged, unanswered) live rows now wait in the restored database."""
    found = rows(live, LIVE_INBOX_SQL)
    with immediate(restored):
        restored.execute(CLOSE_OPEN_SQL, (now_iso(),))
        for row in found:
            if row["status"] == "claimed":  # the server's inbox worker is stopped: nobody holds it
                row.update(status="pending", claimed_by=None, lease_until=None)
            names = ", ".join(row)
            marks = ", ".join(f":{name}" for name in row)
            restored.execute(f"INSERT OR REPLACE INTO inbox ({names}) VALUES ({marks})", row)
    return sum(1 for row in found if row["status"] in ("pending", "claimed"))


def _forgets(conn: apsw.Connection) -> list[tuple]:
    return [tuple(row) for row in conn.execute(FORGETS_SQL)]


def _forget_again(restored: apsw.Connection, settings: Settings, action: str, target: str | None, detail: str) -> None:
    """Do to the restored database what one forget record says was done to the live one."""
    if action == "forget_user" and target:
        erasers = {"telegram_updates": queue.scrub_user, "schedules": schedules.delete_user}
        forget.forget_user(restored, settings, target, RESTORE_ACTOR, erasers=erasers)
    elif action == "forget_memory":
        for memory_id in json.loads(detail).get("memory_ids", []):
            forget.forget_memory(restored, settings, None, int(memory_id), RESTORE_ACTOR)


def reapply_forgets(live: apsw.Connection, restored: apsw.Connection, settings: Settings) -> int:
    """Apply again, in order, the live database's forgets the restored one has not seen; returns how many.

    Every record is carried over as it was written. Those an earlier restore wrote (actor
    RESTORE_ACTOR) are only carried: the original each stands for comes along and is applied
    (applying them too would double the log at every restore from the same backup)."""
    known = set(_forgets(restored))
    missing = [entry for entry in _forgets(live) if entry not in known]
    applied = 0
    for created_at, actor, action, target, detail in missing:
        if actor != RESTORE_ACTOR:
            _forget_again(restored, settings, action, target, detail)  # adds a record naming the restore
            applied += 1
        with immediate(restored):
            restored.execute(INSERT_AUDIT_SQL, (created_at, actor, action, target, detail))
    return applied


def skip_missed_runs(restored: apsw.Connection, settings: Settings, now: float | None = None) -> int:
    """Move every task whose time passed on to its next time, without running it; returns how many."""
    now = time.time() if now is None else now
    moved = 0
    with immediate(restored):
        for job in schedules.due(restored, now, limit=1_000_000):
            firing = plan_job(job, now=now, max_lateness=settings.config.scheduler.max_lateness)
            moved += schedules.advance(
                restored, job, slot=firing.slot, ran=False, next_run_at=firing.next_run_at, now=now
            )
    return moved


def carry_over(live: apsw.Connection | None, restored: apsw.Connection, settings: Settings) -> dict:
    """Everything above, in order (the inbox first, so a re-applied forget scrubs what it carried)."""
    carried = {"inbox_open": 0, "forgets_reapplied": 0}
    if live is not None:
        carried["inbox_open"] = carry_inbox(live, restored)
        carried["forgets_reapplied"] = reapply_forgets(live, restored, settings)
    carried["schedules_moved_on"] = skip_missed_runs(restored, settings)
    return carried


def restore_database(
    settings: Settings,
    environ: Mapping[str, str],
    *,
    source: Path | None = None,
    timestamp: str | None = None,
) -> RestoreResult:
    """Restore the configured database from the file `source`, or from the replica (at
    `timestamp`, RFC 3339, or its latest state), through the schema check and the carry-over above.

    The live database (if any) is only read here, before the copy replaces it; whoever calls this
    while a server runs must have paused its writers (lib/web/restore.py)."""
    db_path = settings.database_path
    staged: Path | None = None
    try:
        if source is None:
            replica = replica_of(settings)
            if replica is None:
                raise ReplicaError("replication is off: set ASH_REPLICA_URL to restore from a replica")
            staged = db_path.with_name(f"{db_path.name}.from-replica-{stamp()}")
            if not restore(replica, staged, environ, settings.home, timestamp=timestamp):
                raise ReplicaError(f"the replica {replica.url} holds nothing to restore")
            source = staged
        live = connect(db_path, readonly=True) if db_path.is_file() else None
        try:
            return restore_from(source, db_path, prepare=lambda work: carry_over(live, work, settings))
        finally:
            if live is not None:
                live.close()
    finally:
        if staged is not None:
            clean_output(staged)
