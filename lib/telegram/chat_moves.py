"""A group upgraded to a supergroup: everything Ash keeps for the chat moves to its new id.

Telegram says so three ways, in any order and possibly more than once: a service message with
`migrate_to_chat_id` in the old group, one with `migrate_from_chat_id` in the new supergroup, and
a 400 carrying `migrate_to_chat_id` when Ash writes to the old id. Each moves the group's
transcript and sessions, its memory (what is said there belongs to the group, lib/memory/scope.py)
with its index and vectors, its /model pick, its scheduled tasks, waiting approvals and /why
records, in one transaction; a second move finds nothing left under the old id. The chat's
sandbox workspace stays under the old id (Docker volumes cannot be renamed); it is deleted once
unused for `[sandbox] workspace_ttl_days`.
"""

from __future__ import annotations

import apsw

from lib.agent import move_pick
from lib.db import immediate
from lib.memory import store
from lib.memory.moves import move_group_memory
from lib.schedule.store import move_chat as move_schedules
from lib.telegram.chats import mark_migrated

PROVIDER = "telegram"
# Rows that name the chat, beside the memory, sessions, pick and tasks moved by their own parts.
CHAT_ROWS = ("answer_sources", "memory_corrections", "tool_executions")
MOVE_WAITING_SQL = """
UPDATE pending_actions
SET chat_id = :new, state = json_set(state, '$.turn.chat_id', :new, '$.turn.chat_type', 'supergroup')
WHERE provider = :provider AND chat_id = :old AND status = 'pending'
"""
MOVE_DECIDED_SQL = "UPDATE pending_actions SET chat_id = :new WHERE provider = :provider AND chat_id = :old"


def move_chat(conn: apsw.Connection, old_chat_id: int | str, new_chat_id: int | str, now: float) -> dict[str, int]:
    """Move the chat's state from `old_chat_id` to `new_chat_id` (idempotent); counts by part."""
    old, new = str(old_chat_id), str(new_chat_id)
    with immediate(conn):
        mark_migrated(conn, old, new)
        counts = move_group_memory(conn, old, new)
        counts["sessions"] = store.move_sessions(conn, PROVIDER, old, new, "supergroup")
        move_pick(conn, PROVIDER, old, new)
        counts["schedules"] = move_schedules(conn, old, new, now)
        params = {"provider": PROVIDER, "old": old, "new": new}
        conn.execute(MOVE_WAITING_SQL, params)
        conn.execute(MOVE_DECIDED_SQL, params)
        for table in CHAT_ROWS:
            where = "chat_id = :old" if table == "tool_executions" else "provider = :provider AND chat_id = :old"
            conn.execute(f"UPDATE {table} SET chat_id = :new WHERE {where}", params)
        if any(counts.values()):
            store.audit(conn, PROVIDER, "chat_migrated", new, moved_from=old, **counts)
    return counts
