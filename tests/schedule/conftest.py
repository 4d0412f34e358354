"""Fixtures for scheduled tasks: an owner and a member, a runtime over a real migrated SQLite file,
the fake Bot API, a clock the test moves, and the real scheduler and inbox worker."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import httpx
import pytest

from lib.db import connect
from lib.inbox.scheduler import Scheduler
from lib.runtime import Runtime
from lib.schedule import store
from lib.schedule.times import parse_at, parse_timing, zone
from lib.telegram.updates import telegram_worker
from tests.support.clock import Clock
from tests.support.telegram import BOT_ID, echo_runner, make_runtime, point_at_fake_bot_api

OWNER = 408258968  # the sender of the recorded private text update
MEMBER = 2002
# A Friday, 10:00 UTC: two days before Europe's clocks go forward (Sunday 29 March 2026).
START = datetime(2026, 3, 27, 10, 0, tzinfo=UTC).timestamp()
CONFIG = f"""owner = {OWNER}
[telegram]
allowed_users = [{MEMBER}]
[embeddings]
provider = "none"
[memory]
extraction_enabled = false
"""


@pytest.fixture
def env(db_path, monkeypatch, ash_home):
    """A migrated database; OWNER owns the bot and MEMBER may talk to it."""
    point_at_fake_bot_api(monkeypatch, ash_home, CONFIG)
    return db_path


@pytest.fixture
async def runtime(env):
    async with httpx.AsyncClient() as http:
        yield make_runtime(http)


@pytest.fixture
def clock() -> Clock:
    return Clock(START)


@dataclass
class Rig:
    """The real inbox worker (answering with `runner`) and the scheduler that feeds it, on one clock."""

    runtime: Runtime
    clock: Clock
    turns: list
    worker: object
    scheduler: Scheduler

    async def at(self, seconds: float) -> int:
        """Move the clock `seconds` on, fire what is due and answer it all; returns the runs queued."""
        self.clock.advance(seconds)
        queued = await self.scheduler.tick()
        await self.worker.drain()
        return queued


def make_rig(runtime: Runtime, clock: Clock, runner=None, turns: list | None = None) -> Rig:
    turns = [] if turns is None else turns
    runtime.clock = clock  # leases and Run / Deny deadlines on the scheduler's time
    worker = telegram_worker(runtime, runner=runner or echo_runner(turns))
    scheduler = Scheduler(runtime.db, runtime.settings, BOT_ID, wake=worker.kick, clock=clock)
    return Rig(runtime, clock, turns, worker, scheduler)


@pytest.fixture
def rig(runtime, clock) -> Rig:
    return make_rig(runtime, clock)


def add_job(
    runtime: Runtime,
    now: float,
    *,
    at: str | None = None,
    every: str | None = None,
    cron: str | None = None,
    timezone: str = "UTC",
    text: str = "stretch",
    action: str = store.MESSAGE,
    user: int = OWNER,
    chat: int = OWNER,
    chat_type: str = "private",
    thread: int | None = None,
    count: int | None = None,
    until: str | None = None,
) -> store.Job:
    """Make a task as the tools do, at the clock's `now`."""
    tz = zone(timezone)
    conn = connect(runtime.settings.database_path)
    try:
        draft = store.Draft(
            user_id=str(user),
            chat_id=str(chat),
            chat_type=chat_type,
            message_thread_id=thread,
            timing=parse_timing(at=at, every=every, cron=cron, tz=tz, now=now),
            action=action,
            text=text,
            max_runs=count,
            ends_at=parse_at(until, tz, now) if until else None,
        )
        return store.create(conn, runtime.settings, draft, now)
    finally:
        conn.close()


def job_row(runtime: Runtime, job_id: int) -> store.Job:
    conn = connect(runtime.settings.database_path)
    try:
        return store.get(conn, job_id)
    finally:
        conn.close()
