"""Scheduled tasks in SQLite: made (within the limits), listed, cancelled, removed, and the
statements the firing transaction (lib/inbox/scheduler.py) is built from.

A task is owned by the person who made it and writes to the chat (and forum topic) it was made
in. Who may cancel it: that person, or the owner. Limits, from `[scheduler]`: active tasks per
person (`max_jobs_per_user`), and how often a task that runs a prompt may run
(`min_prompt_interval`; every run is a model turn, and the daily token budget applies to it).
"""

from __future__ import annotations

import zoneinfo
from dataclasses import dataclass

import apsw

from lib.config import Settings
from lib.db import immediate, iso, one, rows
from lib.errors import ScheduleError
from lib.memory import store as memory_store
from lib.schedule.times import Timing, span_text

MESSAGE, PROMPT = "message", "prompt"
TASK, FOLLOWUP = "task", "followup"
# Longer texts are refused: a reminder is a line or two, a prompt a paragraph.
MAX_TEXT = 4000
# The terminal chat (`ash chat`) has no Telegram chat of its own.
CLI_PROVIDER = "cli"

_COLUMNS = """
s.id, s.user_id, s.chat_id, s.chat_type, s.message_thread_id, s.direct_messages_topic_id, s.kind, s.starts_at,
s.interval_seconds, s.cron, s.timezone, s.action, s.text, s.status, s.next_run_at, s.last_run_at, s.run_count,
s.max_runs, s.ends_at, s.created_at, s.updated_at, s.purpose, s.event_at,
(SELECT r.outcome FROM schedule_runs AS r WHERE r.schedule_id = s.id ORDER BY r.scheduled_for DESC LIMIT 1)
    AS last_outcome
"""

INSERT_SQL = """
INSERT INTO schedules (user_id, chat_id, chat_type, message_thread_id, direct_messages_topic_id, kind, starts_at,
    interval_seconds, cron, timezone, action, text, next_run_at, max_runs, ends_at, created_at, updated_at)
VALUES (:user_id, :chat_id, :chat_type, :message_thread_id, :direct_messages_topic_id, :kind, :starts_at,
    :interval_seconds, :cron, :timezone, :action, :text, :next_run_at, :max_runs, :ends_at, :now, :now)
RETURNING id
"""
# Follow-ups have their own limit (lib/schedule/followups.py MAX_ACTIVE): they never take a task's place.
ACTIVE_COUNT_SQL = "SELECT count(*) AS n FROM schedules WHERE user_id = ? AND status = 'active' AND purpose = 'task'"
GET_SQL = f"SELECT {_COLUMNS} FROM schedules AS s WHERE s.id = ?"
LIST_SQL = f"""
SELECT {_COLUMNS} FROM schedules AS s
WHERE (:user_id IS NULL OR s.user_id = :user_id) AND (:chat_id IS NULL OR s.chat_id = :chat_id)
  AND (:everything OR s.status = 'active')
ORDER BY s.status = 'active' DESC, s.next_run_at, s.id
LIMIT :limit
"""
# INDEXED BY: only active tasks, in the order they fall due (m009's partial index); the cost of a
# tick does not grow with the number of tasks waiting for later.
DUE_SQL = f"""
SELECT {_COLUMNS} FROM schedules AS s INDEXED BY schedules_due
WHERE s.status = 'active' AND s.next_run_at <= :now
ORDER BY s.next_run_at
LIMIT :limit
"""
NEXT_DUE_SQL = """
SELECT next_run_at FROM schedules INDEXED BY schedules_due
WHERE status = 'active' AND next_run_at IS NOT NULL
ORDER BY next_run_at LIMIT 1
"""
# Compare-and-set on the run time the firing read: a task two processes both saw due moves once.
ADVANCE_SQL = """
UPDATE schedules SET next_run_at = :next_run_at,
    status = CASE WHEN :next_run_at IS NULL THEN 'done' ELSE 'active' END,
    last_run_at = CASE WHEN :ran THEN :slot ELSE last_run_at END,
    run_count = run_count + :ran, updated_at = :now
WHERE id = :id AND status = 'active' AND next_run_at = :due_at
"""
RECORD_RUN_SQL = """
INSERT INTO schedule_runs (schedule_id, scheduled_for, fired_at, outcome, note)
VALUES (:schedule_id, :slot, :now, :outcome, :note)
ON CONFLICT (schedule_id, scheduled_for) DO NOTHING
RETURNING id
"""
# A note given replaces the one the firing wrote (late by ...); none keeps it.
FINISH_RUN_SQL = "UPDATE schedule_runs SET outcome = ?, note = coalesce(?, note) WHERE id = ?"
RUN_SQL = "SELECT id, schedule_id, scheduled_for, fired_at, outcome, note FROM schedule_runs WHERE id = ?"
CANCEL_SQL = """
UPDATE schedules SET status = 'cancelled', next_run_at = NULL, updated_at = ?
WHERE id = ? AND status = 'active'
"""
DELETE_USER_SQL = "DELETE FROM schedules WHERE user_id = ?"
# Their count of unanswered follow-ups and their private chat's opt-in go with them.
DELETE_FOLLOWUP_STATE_SQL = """
DELETE FROM followup_people WHERE user_id = :user_id;
DELETE FROM followup_chats WHERE chat_id = :user_id;
"""
MOVE_CHAT_SQL = "UPDATE schedules SET chat_id = ?, updated_at = ? WHERE chat_id = ?"
MOVE_FOLLOWUP_CHAT_SQL = "UPDATE OR REPLACE followup_chats SET chat_id = ? WHERE chat_id = ?"


@dataclass(frozen=True)
class Job:
    """A stored task; times are Unix seconds."""

    id: int
    user_id: str
    chat_id: str
    chat_type: str
    message_thread_id: int | None
    direct_messages_topic_id: int | None
    kind: str
    starts_at: float
    interval_seconds: int | None
    cron: str | None
    timezone: str
    action: str
    text: str
    status: str
    next_run_at: float | None
    last_run_at: float | None
    run_count: int
    max_runs: int | None
    ends_at: float | None
    created_at: str
    updated_at: str
    # TASK, or FOLLOWUP: Ash checks in after the event `text` names, which is at `event_at`
    # (lib/schedule/followups.py).
    purpose: str = "task"
    event_at: float | None = None
    # How its latest run went: queued, sent, skipped, missed or failed (None before the first).
    last_outcome: str | None = None

    @property
    def timing(self) -> Timing:
        """When it runs."""
        return Timing(self.kind, self.starts_at, self.timezone, self.interval_seconds, self.cron)

    @property
    def tz(self) -> zoneinfo.ZoneInfo:
        """The zone its times are read and shown in."""
        return zoneinfo.ZoneInfo(self.timezone)

    @property
    def shown_kind(self) -> str:
        """What the listings call it: a follow-up, or its timing (once, interval, cron)."""
        return FOLLOWUP if self.purpose == FOLLOWUP else self.kind


@dataclass(frozen=True)
class Draft:
    """A task to make: whose, where, when, and what it does (`action` MESSAGE or PROMPT)."""

    user_id: str
    chat_id: str
    timing: Timing
    action: str
    text: str
    chat_type: str = "private"
    message_thread_id: int | None = None
    direct_messages_topic_id: int | None = None
    max_runs: int | None = None
    ends_at: float | None = None


def _job(row: dict | None) -> Job | None:
    return None if row is None else Job(**row)


def zone_for(conn: apsw.Connection, settings: Settings, user_id: str) -> zoneinfo.ZoneInfo:
    """The zone a person's times are read in: their profile's, else config.toml's `timezone`."""
    profile = memory_store.get_profile(conn, user_id)
    return zoneinfo.ZoneInfo(profile.timezone if profile and profile.timezone else settings.config.timezone)


def telegram_chat(provider: str, chat_id: str, user_id: str) -> str:
    """The Telegram chat a task made in this chat writes to. Tasks are delivered on Telegram: one
    made in the terminal (`ash chat`) goes to the person's private chat with the bot, whose id
    is theirs."""
    if provider != CLI_PROVIDER:
        return chat_id
    if not user_id.isdigit():
        raise ScheduleError(
            "Scheduled tasks are delivered on Telegram, and this terminal user has no Telegram id: set `owner` "
            "in config.toml to your numeric Telegram id."
        )
    return user_id


def chat_type(conn: apsw.Connection, chat_id: str) -> str:
    """The type of the Telegram chat a task goes to: as last seen there, else guessed from its id
    (a group's is negative)."""
    seen = one(conn, "SELECT type FROM chats WHERE chat_id = ?", (chat_id,))
    if seen is not None:
        return seen["type"]
    return "supergroup" if chat_id.startswith("-") else "private"


def _check(conn: apsw.Connection, settings: Settings, draft: Draft, now: float) -> float:
    """Refuse what the limits forbid; returns the first run."""
    limits = settings.config.scheduler
    if draft.action not in (MESSAGE, PROMPT):
        raise ScheduleError(f"A task either sends a message or runs a prompt, not {draft.action!r}.")
    if not draft.text.strip():
        raise ScheduleError("Say what to send (message) or what to do (prompt): the text is empty.")
    if len(draft.text) > MAX_TEXT:
        raise ScheduleError(f"The text is {len(draft.text)} characters long; the most is {MAX_TEXT}.")
    first = draft.timing.first_run(now)
    if first <= now:
        raise ScheduleError("That time is in the past.")
    if draft.ends_at is not None and draft.ends_at < first:
        raise ScheduleError("The end comes before the first run: nothing would ever run.")
    if draft.action == PROMPT and draft.timing.shortest_gap(now) < limits.min_prompt_interval:
        raise ScheduleError(
            f"A task that runs a prompt may run at most once every {span_text(limits.min_prompt_interval)} (each run "
            "is a turn of the model; [scheduler] min_prompt_interval). Run it less often, or send a fixed message."
        )
    active = one(conn, ACTIVE_COUNT_SQL, (draft.user_id,))["n"]
    if active >= limits.max_jobs_per_user:
        raise ScheduleError(
            f"You already have {active} active scheduled tasks, the most one person may have "
            "([scheduler] max_jobs_per_user). Cancel one first."
        )
    return first


def create(conn: apsw.Connection, settings: Settings, draft: Draft, now: float) -> Job:
    """Store a new task within the limits; ScheduleError says what is wrong."""
    with immediate(conn):
        first = _check(conn, settings, draft, now)
        timing = draft.timing
        found = rows(
            conn,
            INSERT_SQL,
            {
                "user_id": draft.user_id,
                "chat_id": draft.chat_id,
                "chat_type": draft.chat_type,
                "message_thread_id": draft.message_thread_id,
                "direct_messages_topic_id": draft.direct_messages_topic_id,
                "kind": timing.kind,
                "starts_at": timing.starts_at,
                "interval_seconds": timing.interval_seconds,
                "cron": timing.cron,
                "timezone": timing.timezone,
                "action": draft.action,
                "text": draft.text.strip(),
                "next_run_at": first,
                "max_runs": draft.max_runs,
                "ends_at": draft.ends_at,
                "now": iso(now),
            },
        )
        return get(conn, found[0]["id"])


def get(conn: apsw.Connection, job_id: int) -> Job | None:
    """One task, whatever its status."""
    return _job(one(conn, GET_SQL, (job_id,)))


def listing(
    conn: apsw.Connection,
    *,
    user_id: str | None = None,
    chat_id: str | None = None,
    everything: bool = False,
    limit: int = 200,
) -> list[Job]:
    """Tasks, active ones first in the order they run; `everything` adds done and cancelled ones."""
    found = rows(conn, LIST_SQL, {"user_id": user_id, "chat_id": chat_id, "everything": everything, "limit": limit})
    return [Job(**row) for row in found]


def may_cancel(settings: Settings, job: Job, user_id: str) -> bool:
    """The person who made a task may cancel it, and the owner may cancel any."""
    owner = settings.config.owner
    return job.user_id == user_id or (owner is not None and str(owner) == user_id)


def cancel(conn: apsw.Connection, job_id: int, actor: str, now: float) -> Job | None:
    """Cancel an active task; None when there is no active task with that id."""
    with immediate(conn):
        conn.execute(CANCEL_SQL, (iso(now), job_id))
        if conn.changes() == 0:
            return None
        memory_store.audit(conn, actor, "schedule_cancel", str(job_id))
        return get(conn, job_id)


def delete_user(conn: apsw.Connection, user_id: str) -> int:
    """Remove every task a person made, with its runs (forgetting them, taking their access
    away); returns how many tasks. Their queued runs find no task and are skipped."""
    with immediate(conn):
        conn.execute(DELETE_USER_SQL, (user_id,))
        removed = conn.changes()
        conn.execute(DELETE_FOLLOWUP_STATE_SQL, {"user_id": user_id})
        return removed


def move_chat(conn: apsw.Connection, old_chat_id: int | str, new_chat_id: int | str, now: float) -> int:
    """A group became a supergroup with a new id: its tasks follow it."""
    with immediate(conn):
        conn.execute(MOVE_CHAT_SQL, (str(new_chat_id), iso(now), str(old_chat_id)))
        moved = conn.changes()
        conn.execute(MOVE_FOLLOWUP_CHAT_SQL, (str(new_chat_id), str(old_chat_id)))
        return moved


def due(conn: apsw.Connection, now: float, limit: int) -> list[Job]:
    """Active tasks whose next run is at or before `now`, the earliest first."""
    return [Job(**row) for row in rows(conn, DUE_SQL, {"now": now, "limit": limit})]


def next_due_at(conn: apsw.Connection) -> float | None:
    """When the earliest active task is due (Unix seconds), or None."""
    found = one(conn, NEXT_DUE_SQL)
    return None if found is None else found["next_run_at"]


def record_run(
    conn: apsw.Connection, job_id: int, slot: float, now: float, outcome: str, note: str | None = None
) -> int | None:
    """Record the run of a task for the time `slot`; its id, or None if that time already has one."""
    found = rows(
        conn, RECORD_RUN_SQL, {"schedule_id": job_id, "slot": slot, "now": now, "outcome": outcome, "note": note}
    )
    return found[0]["id"] if found else None


def advance(conn: apsw.Connection, job: Job, *, slot: float, ran: bool, next_run_at: float | None, now: float) -> bool:
    """Move a task past the run it was due for (done when `next_run_at` is None); False when
    someone else moved it first."""
    params = {
        "id": job.id,
        "due_at": job.next_run_at,
        "next_run_at": next_run_at,
        "ran": int(ran),
        "slot": slot,
        "now": iso(now),
    }
    conn.execute(ADVANCE_SQL, params)
    return conn.changes() > 0


def run(conn: apsw.Connection, run_id: int) -> dict | None:
    """One recorded run."""
    return one(conn, RUN_SQL, (run_id,))


def finish_run(conn: apsw.Connection, run_id: int, outcome: str, note: str | None = None) -> None:
    """Record how a queued run went: sent, skipped or failed."""
    with immediate(conn):
        conn.execute(FINISH_RUN_SQL, (outcome, note, run_id))
