"""`/admin/schedules`: list reminders and scheduled tasks, cancel one.

lib.schedule loads with the first request (app.py imports every handler at start-up).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated, Literal

import msgspec
from litestar import Request, delete, get
from litestar.exceptions import HTTPException, NotFoundException
from litestar.params import FromPath, Parameter

from lib.db import iso
from lib.web.auth import admin_guard
from lib.web.state import get_runtime

if TYPE_CHECKING:
    from lib.schedule.store import Job


class ScheduleOut(msgspec.Struct):
    """A task; times are ISO 8601 UTC, `when` says it in words in the task's zone."""

    id: int
    user_id: str
    chat_id: str
    chat_type: str
    message_thread_id: int | None
    # "followup": Ash checks in after `event` (at `event_at`); the others say how often a task runs.
    kind: Literal["once", "interval", "cron", "followup"]
    when: str
    interval_seconds: int | None
    cron: str | None
    timezone: str
    action: Literal["message", "prompt"]
    text: str
    status: Literal["active", "done", "cancelled"]
    next_run_at: str | None
    last_run_at: str | None
    last_outcome: str | None
    run_count: int
    max_runs: int | None
    ends_at: str | None
    created_at: str
    event: str | None = None
    event_at: str | None = None


class ScheduleList(msgspec.Struct):
    items: list[ScheduleOut]
    count: int


def _time(instant: float | None) -> str | None:
    return None if instant is None else iso(instant)


def schedule_out(job: Job) -> ScheduleOut:
    """The API shape of a task."""
    from lib.schedule import describe

    return ScheduleOut(
        id=job.id,
        user_id=job.user_id,
        chat_id=job.chat_id,
        chat_type=job.chat_type,
        message_thread_id=job.message_thread_id,
        kind=job.shown_kind,
        when=describe.event_when(job) if job.event_at is not None else describe.when(job),
        interval_seconds=job.interval_seconds,
        cron=job.cron,
        timezone=job.timezone,
        action=job.action,
        text=job.text,
        status=job.status,
        next_run_at=_time(job.next_run_at),
        last_run_at=_time(job.last_run_at),
        last_outcome=job.last_outcome,
        run_count=job.run_count,
        max_runs=job.max_runs,
        event=job.text if job.event_at is not None else None,
        event_at=_time(job.event_at),
        ends_at=_time(job.ends_at),
        created_at=job.created_at,
    )


@get("/admin/schedules", guards=[admin_guard], sync_to_thread=True)
def list_schedules(
    request: Request,
    user_id: Annotated[str | None, Parameter(description="Only the tasks this user made.")] = None,
    chat_id: Annotated[str | None, Parameter(description="Only the tasks of this chat.")] = None,
    include_finished: Annotated[bool, Parameter(description="Also done and cancelled tasks.")] = False,
    limit: Annotated[int, Parameter(ge=1, le=1000, description="Most tasks returned.")] = 200,
) -> ScheduleList:
    """Tasks, active ones first in the order they run."""
    from lib.schedule import store

    conn = get_runtime(request.app).db.conn()
    jobs = store.listing(conn, user_id=user_id, chat_id=chat_id, everything=include_finished, limit=limit)
    return ScheduleList(items=[schedule_out(job) for job in jobs], count=len(jobs))


@delete("/admin/schedules/{schedule_id:int}", guards=[admin_guard], sync_to_thread=True, status_code=200)
def cancel_schedule(request: Request, schedule_id: FromPath[int]) -> ScheduleOut:
    """Cancel a task: 404 when there is none with that id, 409 when it already ended."""
    from lib.schedule import store

    conn = get_runtime(request.app).db.conn()
    job = store.get(conn, schedule_id)
    if job is None:
        raise NotFoundException(f"there is no scheduled task {schedule_id}")
    cancelled = store.cancel(conn, schedule_id, "admin", time.time())
    if cancelled is None:
        raise HTTPException(status_code=409, detail=f"scheduled task {schedule_id} is already {job.status}")
    return schedule_out(cancelled)
