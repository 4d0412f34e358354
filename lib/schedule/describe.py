"""A task in words, for the chat, the model and the terminal: "#3 every day at 08:00 ...".

Times are shown in the task's own zone, with the zone's name, so nobody has to guess.
"""

from __future__ import annotations

import zoneinfo

from lib.schedule.store import FOLLOWUP, PROMPT, Job
from lib.schedule.times import CRON, INTERVAL, local_time, span_text

# How much of a task's text a one-line listing shows.
PREVIEW = 80


def moment(instant: float, tz: zoneinfo.ZoneInfo) -> str:
    """ "Tue 5 May 2026, 09:00 (Europe/Lisbon)"."""
    at = local_time(instant, tz)
    return f"{at:%a} {at.day} {at:%b %Y, %H:%M} ({tz.key})"


def when(job: Job) -> str:
    """How often the task runs."""
    if job.kind == INTERVAL:
        return f"every {span_text(job.interval_seconds)}"
    if job.kind == CRON:
        return f"on the schedule `{job.cron}` ({job.timezone})"
    return "once"


def preview(text: str, limit: int = PREVIEW) -> str:
    """The first line of a text, cut to `limit` characters."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def what(job: Job, limit: int = PREVIEW) -> str:
    """What the task does when it runs."""
    verb = "runs the prompt" if job.action == PROMPT else "sends"
    return f'{verb} "{preview(job.text, limit)}"'


def event_when(job: Job) -> str:
    """When a follow-up's event is: its day and time, or its day alone for an all-day event."""
    at = local_time(job.event_at, job.tz)
    if at.hour == 0 and at.minute == 0:
        return f"{at:%a} {at.day} {at:%b %Y} ({job.tz.key})"
    return moment(job.event_at, job.tz)


def followup_line(job: Job) -> str:
    """A follow-up on one line: its event, when that is, and when Ash checks in."""
    parts = [f'#{job.id} follow-up on "{preview(job.text)}", {event_when(job)}']
    parts.append(f"check-in: {moment(job.next_run_at, job.tz)}" if job.next_run_at is not None else job.status)
    return "; ".join(parts)


def line(job: Job) -> str:
    """One task on one line: id, when, what, and its next run (or how it ended)."""
    if job.purpose == FOLLOWUP and job.event_at is not None:
        return followup_line(job)
    parts = [f"#{job.id} {when(job)}, {what(job)}"]
    if job.next_run_at is not None:
        parts.append(f"next: {moment(job.next_run_at, job.tz)}")
    else:
        parts.append(job.status)
    if job.max_runs is not None:
        parts.append(f"run {job.run_count} of {job.max_runs}")
    if job.ends_at is not None:
        parts.append(f"until {moment(job.ends_at, job.tz)}")
    return "; ".join(parts)
