"""Taking back one audited change to memory (`ash memory undo AUDIT_ID`, /why's Undo button).

Each audit row names the entries it changed (lib/memory/audit.py); undoing it puts them back as
they were before it, search index included, and is audited itself (`memory_undo`, with
`undoes`: the row's id). A change is undone once; a change whose entries have moved on since
(forgotten, replaced again, decided again) is refused with the reason, and nothing changes.

- `memory_add`: the entry goes (with its index rows and the note line extraction wrote for it);
  entries it had superseded come back, since their link is cleared with it.
- `memory_supersede`: the older entry is current again, and its note line is back for a fact
  Ash extracted.
- `memory_keep` / `memory_discard`: the entry waits for review again (out of the index).
- `memory_reinforce`: confidence, expiry and counters as they were (the row records them).
- `memory_retire`: the entry is back in retrieval, as `ash memory restore` does (with the note
  line, in its place, that consolidation took out of the notes with an extracted fact).
- `forget_memory` / `forget_message` made from /why: while their hold lasts (lib/memory/holds.py,
  ten minutes) the entries, messages and note lines come back, re-indexed.
- Otherwise forgetting, expiry and eviction delete the text for real (Forgetting is real: the
  audit log never holds it), so they cannot be undone: the answer says so.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import apsw

from lib.config import Settings
from lib.db import immediate, one
from lib.memory import audit, correct, holds, knowledge

# The changes undo takes back (the web view's audit page offers Undo for these).
UNDOABLE = frozenset(
    {"memory_add", "memory_supersede", "memory_keep", "memory_discard", "memory_reinforce", "memory_retire"}
)
GONE_FOR_GOOD = frozenset({"forget_memory", "forget_user", "memory_expire", "memory_evict", "memory_replace"})
# Forgets that may be held for Undo a while (lib/memory/holds.py).
HELD = frozenset({"forget_memory", "forget_message"})
ROW_SQL = "SELECT id, actor, action, target, detail FROM audit_log WHERE id = ?"
DONE_SQL = """
SELECT id FROM audit_log WHERE action = 'memory_undo' AND json_extract(detail, '$.undoes') = ?
"""
UNSUPERSEDE_SQL = """
UPDATE memories SET superseded_by = NULL, superseded_at = NULL WHERE id = :old AND superseded_by = :new
"""
UNDECIDE_SQL = "UPDATE memories SET status = 'pending', reviewed_at = NULL WHERE id = ? AND status = ?"
UNREINFORCE_SQL = """
UPDATE memories SET confidence = :confidence, expires_at = :expires_at, reinforced_count = :reinforced_count,
                    last_reinforced_at = :last_reinforced_at
WHERE id = :id
"""


@dataclass(frozen=True)
class Undone:
    """What an undo did: whether it changed anything, and a sentence saying what or why not."""

    ok: bool
    message: str


def _index():
    from lib.memory.search import index

    return index


def _owner(entry: knowledge.Knowledge) -> str | None:
    return None if entry.is_global else entry.owner_user_id


def _undo_add(conn: apsw.Connection, settings: Settings, ids: list[int], actor: str) -> str:
    for memory_id in ids:
        entry = knowledge.get(conn, memory_id)
        if entry is None:
            raise _Refused(f"memory #{memory_id} was forgotten since: there is nothing left to take back")
    # The text goes for real, as a forget's does (lib/memory/forget.py): freed space is zeroed.
    conn.pragma("secure_delete", True)
    try:
        for memory_id in ids:
            entry = knowledge.get(conn, memory_id)
            _index().unindex(conn, "memory", memory_id)
            conn.execute("DELETE FROM memories WHERE id = ?", (memory_id,))
            if entry.source == "extraction" and entry.owner_user_id is not None:
                correct.forget_fact_notes(conn, entry.owner_user_id, entry.content, actor)
    finally:
        conn.pragma("secure_delete", "FAST")
    return f"removed memory {', '.join(f'#{i}' for i in ids)}"


def _undo_supersede(conn: apsw.Connection, settings: Settings, detail: dict, actor: str) -> str:
    old_id, new_id = detail.get("superseded"), detail.get("by")
    with immediate(conn):
        conn.execute(UNSUPERSEDE_SQL, {"old": old_id, "new": new_id})
        if not conn.changes():
            raise _Refused(f"memory #{old_id} is no longer replaced by #{new_id}")
        new = knowledge.get(conn, new_id)
        if new is not None:
            meta = {**new.metadata, "supersedes": [i for i in new.metadata.get("supersedes", []) if i != old_id]}
            if not meta["supersedes"]:
                del meta["supersedes"]
            conn.execute("UPDATE memories SET metadata = ? WHERE id = ?", (json.dumps(meta), new_id))
        old = knowledge.get(conn, old_id)
        _index().index_memory(conn, settings, old_id)
        if old.source == "extraction" and old.owner_user_id is not None:
            correct.restore_fact_note(conn, old.owner_user_id, old.content, actor, at=detail.get("note_line"))
    return f"memory #{old_id} is current again (#{new_id} no longer replaces it)"


def _undo_decision(conn: apsw.Connection, ids: list[int], to: str) -> str:
    with immediate(conn):
        for memory_id in ids:
            conn.execute(UNDECIDE_SQL, (memory_id, to))
            if not conn.changes():
                raise _Refused(f"memory #{memory_id} is no longer {to}")
            _index().unindex(conn, "memory", memory_id)
    return f"memory {', '.join(f'#{i}' for i in ids)} waits for review again"


def _undo_reinforce(conn: apsw.Connection, ids: list[int], detail: dict) -> str:
    before = detail.get("before")
    if not isinstance(before, dict) or len(ids) != 1:
        raise _Refused("this reinforcement was recorded before undo existed: its earlier values are unknown")
    with immediate(conn):
        conn.execute(UNREINFORCE_SQL, {**before, "id": ids[0]})
        if not conn.changes():
            raise _Refused(f"memory #{ids[0]} was forgotten since")
    return f"memory #{ids[0]} has its earlier confidence ({before['confidence']:.2f}) again"


def _undo_retire(conn: apsw.Connection, settings: Settings, ids: list[int], detail: dict, actor: str) -> str:
    with immediate(conn):
        for memory_id in ids:
            conn.execute("UPDATE memories SET retired_at = NULL WHERE id = ? AND retired_at IS NOT NULL", (memory_id,))
            if conn.changes():
                _index().index_memory(conn, settings, memory_id)
        # Consolidation's expiry took an extracted fact's line out of the notes (lib/memory/consolidate.py).
        entry = knowledge.get(conn, ids[0]) if "note_line" in detail and len(ids) == 1 else None
        if entry is not None and entry.owner_user_id is not None:
            correct.restore_fact_note(conn, entry.owner_user_id, entry.content, actor, at=detail["note_line"])
    return f"memory {', '.join(f'#{i}' for i in ids)} is back in retrieval"


class _Refused(Exception):
    """The change cannot be undone (the reason is the message)."""


def undo(conn: apsw.Connection, settings: Settings, audit_id: int, *, actor: str, now: float | None = None) -> Undone:
    """Undo the change audit row `audit_id` records (see the module docstring); `now` for a
    forget's hold (lib/memory/holds.py), the wall clock by default."""
    row = one(conn, ROW_SQL, (audit_id,))
    if row is None:
        return Undone(False, f"there is no audit entry #{audit_id}")
    action, detail = row["action"], json.loads(row["detail"] or "{}")
    ids = [int(i) for i in detail.get("memory_ids") or ([detail["memory_id"]] if "memory_id" in detail else [])]
    if one(conn, DONE_SQL, (audit_id,)) is not None:
        return Undone(False, f"#{audit_id} was undone already")
    kept = holds.held(conn, audit_id, time.time() if now is None else now) if action in HELD else None
    if kept is None and action in GONE_FOR_GOOD | HELD:
        return Undone(False, f"#{audit_id} ({action}) deleted the text for real: it no longer exists to bring back")
    try:
        with immediate(conn):
            if kept is not None:
                ids = holds.restore(conn, settings, audit_id, kept, actor)
                said = f"what it deleted is back ({len(kept['memories'])} entries, {len(kept['messages'])} messages)"
            elif action == "memory_add":
                said = _undo_add(conn, settings, ids, actor)
            elif action == "memory_supersede":
                said = _undo_supersede(conn, settings, detail, actor)
            elif action in ("memory_keep", "memory_discard"):
                said = _undo_decision(conn, ids, "active" if action == "memory_keep" else "discarded")
            elif action == "memory_reinforce":
                said = _undo_reinforce(conn, ids, detail)
            elif action == "memory_retire":
                said = _undo_retire(conn, settings, ids, detail, actor)
            else:
                return Undone(False, f"#{audit_id} ({action}) is not a change undo knows how to take back")
            audit.record(
                conn,
                actor,
                "memory_undo",
                ids,
                row["target"] if row["target"] != "global" else None,
                undoes=audit_id,
                undone_action=action,
            )
    except (_Refused, LookupError) as refused:
        return Undone(False, f"cannot undo #{audit_id}: {refused}")
    return Undone(True, f"undid #{audit_id} ({action}): {said}")


def last_change(conn: apsw.Connection, memory_id: int, action: str) -> int | None:
    """The id of the newest audit row of `action` about entry `memory_id` (for an Undo button)."""
    found = [e for e in audit.history(conn, memory_id) if e.action == action]
    return found[-1].id if found else None
