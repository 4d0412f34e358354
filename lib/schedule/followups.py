"""Ash follows up: an event noticed in what a person writes becomes a scheduled task of purpose
FOLLOWUP, and Ash checks in once after it.

Opt-in per chat, off by default (`/followups on`, `ash users followups ID on`): a private chat's
choice is its person's; a group's is the owner's. Every message of an opted-in chat is read by
the rules in events.py (no model call): a coming event makes a follow-up (or updates the one
already kept for it), a change moves it, a cancellation cancels it.

When Ash checks in: an hour after a timed event's expected end (CHECK_IN_AFTER from its start),
or at EVENING on the day of an all-day one; never inside `[followups] quiet_hours` in the
person's zone (a time inside them moves to their end). A follow-up fires through the inbox like
any scheduled task, so it is sent at most once; lib/telegram/scheduled.py checks, as it sends,
the quiet hours again (downtime can make it late), `[followups] max_per_day`, the daily token
budget, and `unanswered`: after SILENT_AFTER follow-ups the person has not answered, none is
sent until they write again.
"""

from __future__ import annotations

import zoneinfo
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

import apsw

from lib.config import Settings
from lib.db import immediate, iso, one, rows
from lib.memory import store as memory_store
from lib.schedule import events
from lib.schedule.store import CANCEL_SQL, FOLLOWUP, PROMPT, Job, get, listing, zone_for
from lib.schedule.times import local_time, to_instant

# A timed event is taken to last an hour; Ash asks an hour after that.
CHECK_IN_AFTER = timedelta(hours=2)
# An all-day event ("flight on Friday") is asked about that evening.
EVENING = time(19)
# Follow-ups one person may have waiting; past this, new events are not followed up.
MAX_ACTIVE = 20
# Unanswered follow-ups after which Ash stays quiet until the person writes.
SILENT_AFTER = 2

ENABLED_SQL = "SELECT enabled FROM followup_chats WHERE chat_id = ?"
SET_SQL = """
INSERT INTO followup_chats (chat_id, enabled, changed_by, changed_at) VALUES (?, ?, ?, ?)
ON CONFLICT (chat_id) DO UPDATE SET enabled = excluded.enabled, changed_by = excluded.changed_by,
    changed_at = excluded.changed_at
"""
INSERT_SQL = """
INSERT INTO schedules (user_id, chat_id, chat_type, message_thread_id, direct_messages_topic_id, kind, starts_at,
    timezone, action, text, next_run_at, purpose, event_at, created_at, updated_at)
VALUES (:user_id, :chat_id, :chat_type, :thread, :topic, 'once', :at, :timezone, :action, :text, :at, 'followup',
    :event_at, :now, :now)
RETURNING id
"""
MOVE_SQL = """
UPDATE schedules SET starts_at = :at, next_run_at = :at, event_at = :event_at, text = :text, updated_at = :now
WHERE id = :id AND status = 'active'
"""
ACTIVE_SQL = """
SELECT id FROM schedules INDEXED BY schedules_followups
WHERE purpose = 'followup' AND status = 'active' AND user_id = ? AND chat_id = ?
ORDER BY id DESC
"""
ACTIVE_COUNT_SQL = """
SELECT count(*) AS n FROM schedules WHERE purpose = 'followup' AND status = 'active' AND user_id = ?
"""
WROTE_SQL = "UPDATE followup_people SET unanswered = 0 WHERE user_id = ? AND unanswered > 0"
UNANSWERED_SQL = "SELECT unanswered FROM followup_people WHERE user_id = ?"
SENT_SQL = """
INSERT INTO followup_people (user_id, unanswered) VALUES (?, 1)
ON CONFLICT (user_id) DO UPDATE SET unanswered = unanswered + 1
"""
SENT_SINCE_SQL = """
SELECT count(*) AS n FROM schedule_runs AS r JOIN schedules AS s ON s.id = r.schedule_id
WHERE s.purpose = 'followup' AND s.user_id = ? AND r.outcome = 'sent' AND r.fired_at >= ?
"""


@dataclass(frozen=True)
class Change:
    """What a message did to the person's follow-ups: `what` is events.EVENT (made or updated),
    MOVE or CANCEL, and `job` the follow-up as it is now."""

    what: str
    job: Job


def enabled(conn: apsw.Connection, chat_id: str) -> bool:
    """Whether Ash follows up in this chat (off unless turned on)."""
    found = one(conn, ENABLED_SQL, (chat_id,))
    return bool(found and found["enabled"])


def set_enabled(conn: apsw.Connection, chat_id: str, on: bool, actor: str, now: float) -> int:
    """Turn follow-ups on or off for a chat; off also cancels its waiting follow-ups (returns how many)."""
    with immediate(conn):
        conn.execute(SET_SQL, (chat_id, int(on), actor, iso(now)))
        cancelled = 0
        if not on:
            for found in rows(conn, "SELECT DISTINCT user_id FROM schedules WHERE chat_id = ?", (chat_id,)):
                for job_id in _active_ids(conn, found["user_id"], chat_id):
                    conn.execute(CANCEL_SQL, (iso(now), job_id))
                    cancelled += conn.changes()
        memory_store.audit(conn, actor, "followups_on" if on else "followups_off", chat_id)
        return cancelled


def quiet_window(settings: Settings) -> tuple[time, time]:
    """`[followups] quiet_hours` as (start, end) local times."""
    start, end = settings.config.followups.quiet_hours.split("-")
    return time.fromisoformat(start), time.fromisoformat(end)


def in_quiet(instant: float, tz: zoneinfo.ZoneInfo, window: tuple[time, time]) -> bool:
    """Whether `instant` falls inside the quiet hours in `tz` (a window may cross midnight)."""
    start, end = window
    at = local_time(instant, tz).time()
    return start <= at < end if start <= end else (at >= start or at < end)


def out_of_quiet(instant: float, tz: zoneinfo.ZoneInfo, window: tuple[time, time]) -> float:
    """`instant`, or the end of the quiet hours it falls in."""
    if not in_quiet(instant, tz, window):
        return instant
    local = local_time(instant, tz)
    day = local.date() if local.time() < window[1] else local.date() + timedelta(days=1)
    return to_instant(datetime.combine(day, window[1]), tz)


def check_in_at(event_at: float, all_day: bool, tz: zoneinfo.ZoneInfo, settings: Settings) -> float:
    """When Ash checks in after an event starting at `event_at`."""
    if all_day:
        moment = to_instant(datetime.combine(local_time(event_at, tz).date(), EVENING), tz)
    else:
        moment = event_at + CHECK_IN_AFTER.total_seconds()
    return out_of_quiet(moment, tz, quiet_window(settings))


def is_all_day(job: Job) -> bool:
    """A follow-up's event has no time of day (kept as its day's midnight)."""
    return job.event_at is not None and local_time(job.event_at, job.tz).time() == time(0)


def _active_ids(conn: apsw.Connection, user_id: str, chat_id: str) -> list[int]:
    return [found["id"] for found in rows(conn, ACTIVE_SQL, (user_id, chat_id))]


def active(conn: apsw.Connection, user_id: str, chat_id: str) -> list[Job]:
    """The person's waiting follow-ups in this chat, the newest first."""
    return [get(conn, job_id) for job_id in _active_ids(conn, user_id, chat_id)]


def _matching(conn: apsw.Connection, user_id: str, chat_id: str, noticed: events.Noticed) -> Job | None:
    """The newest waiting follow-up about the event a message names."""
    return next((job for job in active(conn, user_id, chat_id) if events.event_names(job.text) & noticed.names), None)


@dataclass(frozen=True)
class Where:
    """Who wrote, and where a follow-up about it is sent."""

    user_id: str
    chat_id: str
    chat_type: str = "private"
    message_thread_id: int | None = None
    direct_messages_topic_id: int | None = None


def _create(conn, settings: Settings, where: Where, noticed: events.Noticed, tz, now: float) -> Job | None:
    if one(conn, ACTIVE_COUNT_SQL, (where.user_id,))["n"] >= MAX_ACTIVE:
        return None
    event_at = noticed.starts_at(tz)
    params = {
        "user_id": where.user_id,
        "chat_id": where.chat_id,
        "chat_type": where.chat_type,
        "thread": where.message_thread_id,
        "topic": where.direct_messages_topic_id,
        "at": check_in_at(event_at, noticed.clock is None, tz, settings),
        "timezone": tz.key,
        "action": PROMPT,
        "text": noticed.event,
        "event_at": event_at,
        "now": iso(now),
    }
    return get(conn, rows(conn, INSERT_SQL, params)[0]["id"])


def _move(conn, settings: Settings, job: Job, noticed: events.Noticed, tz, now: float) -> Job | None:
    """Move `job` to the day and time a message gives; the part not given stays as it was."""
    old = local_time(job.event_at, tz)
    day: date = noticed.day or old.date()
    clock = noticed.clock or (None if noticed.day is not None or is_all_day(job) else old.time())
    event_at = to_instant(datetime.combine(day, clock or time(0)), tz)
    at = check_in_at(event_at, clock is None, tz, settings)
    if at <= now:
        return None
    text = job.text if noticed.what == events.MOVE else noticed.event
    conn.execute(MOVE_SQL, {"id": job.id, "at": at, "event_at": event_at, "text": text, "now": iso(now)})
    return get(conn, job.id)


def on_message(conn: apsw.Connection, settings: Settings, where: Where, text: str, now: float) -> Change | None:
    """Read a person's message for their follow-ups: they wrote (so they may be followed up
    again), and in an opted-in chat an event makes, moves or cancels one."""
    # The common message (follow-ups off, nothing unanswered) reads two rows and takes no write lock.
    if not enabled(conn, where.chat_id):
        if (one(conn, UNANSWERED_SQL, (where.user_id,)) or {"unanswered": 0})["unanswered"] > 0:
            with immediate(conn):
                conn.execute(WROTE_SQL, (where.user_id,))
        return None
    with immediate(conn):
        conn.execute(WROTE_SQL, (where.user_id,))
        tz = zone_for(conn, settings, where.user_id)
        noticed = events.notice(text, tz, now)
        if noticed is None:
            return None
        job = _matching(conn, where.user_id, where.chat_id, noticed)
        if noticed.what == events.CANCEL:
            if job is None:
                return None
            conn.execute(CANCEL_SQL, (iso(now), job.id))
            memory_store.audit(conn, f"followup:{where.user_id}", "followup_cancel", str(job.id))
            return Change(events.CANCEL, get(conn, job.id))
        moves = job is not None and (noticed.what == events.MOVE or _same_day(job, noticed))
        if moves:
            changed = _move(conn, settings, job, noticed, tz, now)
        elif noticed.day is None:
            return None  # "moved to 3pm" of an event Ash does not know
        else:
            changed = _create(conn, settings, where, noticed, tz, now)
        if changed is None:
            return None
        action = "followup_move" if moves else "followup_create"  # move: moved, or said again
        memory_store.audit(conn, f"followup:{where.user_id}", action, str(changed.id))
        return Change(noticed.what if moves else events.EVENT, changed)


def _same_day(job: Job, noticed: events.Noticed) -> bool:
    """The event said again (or the message read again after a restart): same event, same day."""
    return local_time(job.event_at, job.tz).date() == noticed.day


def silenced(conn: apsw.Connection, user_id: str) -> bool:
    """The person has not answered the last SILENT_AFTER follow-ups."""
    found = one(conn, UNANSWERED_SQL, (user_id,))
    return bool(found and found["unanswered"] >= SILENT_AFTER)


def sent_today(conn: apsw.Connection, user_id: str, tz: zoneinfo.ZoneInfo, now: float) -> int:
    """Follow-ups sent to the person since the start of their local day."""
    midnight = to_instant(datetime.combine(local_time(now, tz).date(), time(0)), tz)
    return one(conn, SENT_SINCE_SQL, (user_id, midnight))["n"]


def sent(conn: apsw.Connection, user_id: str) -> None:
    """A follow-up was sent: one more the person has not answered yet."""
    with immediate(conn):
        conn.execute(SENT_SQL, (user_id,))


def waiting(conn: apsw.Connection, *, user_id: str | None = None, chat_id: str | None = None) -> list[Job]:
    """Waiting follow-ups (every purpose is in store.listing; this keeps only follow-ups)."""
    return [job for job in listing(conn, user_id=user_id, chat_id=chat_id) if job.purpose == FOLLOWUP]


def why_not_now(conn: apsw.Connection, settings: Settings, job: Job, now: float) -> str | None:
    """Why a fired follow-up must not be sent at `now` (it is then skipped, not sent later), or None."""
    if not enabled(conn, job.chat_id):
        return "follow-ups were turned off in this chat"
    if in_quiet(now, job.tz, quiet_window(settings)):
        return "inside [followups] quiet_hours"
    if silenced(conn, job.user_id):
        return f"the last {SILENT_AFTER} follow-ups are unanswered"
    if sent_today(conn, job.user_id, job.tz, now) >= settings.config.followups.max_per_day:
        return "[followups] max_per_day reached"
    return None


def check_in_prompt(job: Job, when: str) -> str:
    """The turn's message for a check-in: what the event was, and what to write."""
    return (
        f'[Follow-up #{job.id}: earlier, this user mentioned "{job.text}" ({when}), which is now over. Write one '
        "short, warm message (one or two sentences) asking how it went, drawing on what you remember about it. "
        "Do not mention this note, follow-ups or reminders.]"
    )
