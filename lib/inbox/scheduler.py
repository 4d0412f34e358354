"""Scheduled tasks enter the inbox when they fall due, so the inbox's guarantees hold for them.

Firing a due task is one transaction: record the run for (task, scheduled time) (unique, so a
time fires once), move the task to its next time, and queue the work as an inbox row of kind
queue.SCHEDULED (lib/inbox/queue.py enqueue_own: an update_id Telegram never uses, placed after
what its chat has received). From there the worker runs it as it runs any update: one turn
per chat at a time, in order, resumed after a crash, never twice. Two server processes on one
database fire each time once: the transaction takes SQLite's write lock first, so the second
process finds the task already moved on.

The timer sleeps until the earliest due task (or until told a task changed), and wakes at
least every `[server] tick_interval` seconds as a backstop for tasks another process made.
`clock` is Unix seconds, injected so tests control time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import apsw
import msgspec

from lib.config import Settings
from lib.db import Database, immediate
from lib.errors import AshError
from lib.inbox import queue
from lib.schedule import store
from lib.schedule.plan import Firing, plan_job

if TYPE_CHECKING:
    from lib.runtime import Signal

log = logging.getLogger("ash.scheduler")

# Tasks fired per transaction: bounds how long one firing holds the write lock.
BATCH = 200
# Woken this long after the earliest due time, so a timer that fires a hair early finds it due.
TIMER_SLACK = 0.005


class Payload(msgspec.Struct, frozen=True):
    """What a queued run carries: which task and run. The task's text stays in its row (so
    forgetting the person forgets it), and is read when the run starts."""

    schedule_id: int
    run_id: int
    scheduled_for: float
    late_by: float = 0.0
    missed: int = 0
    # Fired long after its time (Ash was not running): the person is told it comes late.
    late: bool = False


PAYLOAD_DECODER = msgspec.json.Decoder(Payload)


def _note(firing: Firing) -> str | None:
    if not firing.runs:
        return f"missed: {firing.late_by:.0f} s late, over [scheduler] max_lateness"
    if firing.late:
        return f"late by {firing.late_by:.0f} s" + (f", for {firing.missed} missed run(s)" if firing.missed else "")
    return None


def _fire(conn: apsw.Connection, settings: Settings, bot_id: int, job: store.Job, now: float) -> int | None:
    """Fire one due task inside the caller's transaction; the inbox update_id queued, if any."""
    firing = plan_job(job, now=now, max_lateness=settings.config.scheduler.max_lateness)
    note = _note(firing)
    run_id = store.record_run(conn, job.id, firing.slot, now, "queued" if firing.runs else "missed", note)
    ran = firing.runs and run_id is not None
    if not store.advance(conn, job, slot=firing.slot, ran=ran, next_run_at=firing.next_run_at, now=now):
        return None  # moved on by someone else since it was read
    if run_id is None:
        log.warning("task %s: its run for %s was already recorded; not fired again", job.id, firing.slot)
        return None
    if not firing.runs:
        log.warning(
            "task %s: skipped its run due %.0f s ago, later than [scheduler] max_lateness (%.0f s)",
            job.id,
            firing.late_by,
            settings.config.scheduler.max_lateness,
        )
        return None
    payload = Payload(job.id, run_id, firing.slot, round(firing.late_by, 3), firing.missed, firing.late)
    return queue.enqueue_own(conn, bot_id, run_id, job.chat_id, queue.SCHEDULED, msgspec.json.encode(payload))


def fire_due(conn: apsw.Connection, settings: Settings, bot_id: int, now: float) -> list[int]:
    """Fire every task due at `now` into the inbox; returns the update_ids queued."""
    earliest = store.next_due_at(conn)
    if earliest is None or earliest > now:
        return []  # the common tick: a read, no write lock taken
    queued: list[int] = []
    while True:
        with immediate(conn):
            jobs = store.due(conn, now, BATCH)
            for job in jobs:
                try:
                    with conn:  # a savepoint: one task that cannot be fired spoils no other
                        update_id = _fire(conn, settings, bot_id, job, now)
                except (AshError, ValueError, apsw.Error, LookupError):
                    # A task that cannot be read (a time zone the system no longer has): it would be
                    # due again every tick, so it is finished and the log says why.
                    log.exception("task %s cannot be fired; it is stopped", job.id)
                    store.advance(conn, job, slot=job.next_run_at, ran=False, next_run_at=None, now=now)
                    continue
                if update_id is not None:
                    queued.append(update_id)
        if len(jobs) < BATCH:
            return queued


class Scheduler:
    """One per server process: fires due tasks into the inbox and wakes the worker (`wake`)."""

    def __init__(
        self,
        db: Database,
        settings: Settings,
        bot_id: int,
        *,
        wake: Callable[[], None],
        schedule_changed: Signal | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self.db = db
        self.settings = settings
        self.bot_id = bot_id
        self.wake = wake
        # Told when a task was made or cancelled (the runtime's schedule_changed): re-arm at once.
        self.schedule_changed = schedule_changed
        self.clock = clock
        self._changed = asyncio.Event()
        self._task: asyncio.Task | None = None
        # Set each time the timer is armed, with the seconds it then waits: what a test waits on
        # (rather than sleeping) to know the timer is armed, and for how long.
        self.armed = asyncio.Event()
        self.armed_for: float | None = None

    async def start(self) -> None:
        """Start the timer: due tasks fire at once (those missed while the process was down)."""
        self._task = asyncio.create_task(self._loop(), name="ash-scheduler")
        if self.schedule_changed is not None:
            self.schedule_changed.connect(self.kick)

    def kick(self) -> None:
        """A task was made or changed: re-arm the timer for the earliest due one."""
        self._changed.set()

    async def stop(self) -> None:
        """Stop the timer (a firing in progress commits or rolls back whole)."""
        if self.schedule_changed is not None:
            self.schedule_changed.disconnect(self.kick)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def tick(self) -> int:
        """Fire what is due now (the timer, and POST /admin/tick); returns how many runs were queued."""
        now = self.clock()
        queued = await asyncio.to_thread(lambda: fire_due(self.db.conn(), self.settings, self.bot_id, now))
        if queued:
            log.info("queued %d scheduled run(s)", len(queued))
            self.wake()
        return len(queued)

    async def _sleep_for(self) -> float:
        """Seconds until the earliest due task, at most the tick interval."""
        backstop = self.settings.config.server.tick_interval
        earliest = await asyncio.to_thread(lambda: store.next_due_at(self.db.conn()))
        if earliest is None:
            return backstop
        return min(max(earliest - self.clock(), 0.0) + TIMER_SLACK, backstop)

    async def _loop(self) -> None:
        while True:
            self._changed.clear()  # a change from here on re-arms the timer below
            delay = self.settings.config.server.tick_interval
            try:
                await self.tick()
                delay = await self._sleep_for()
            except Exception:
                log.exception("scheduler: unexpected error; trying again at the next tick")
            self.armed_for = delay
            self.armed.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), delay)
