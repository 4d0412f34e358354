"""The lease worker: turns stored updates into work, one chat at a time, without losing any.

It wakes after each webhook response, at start-up, every server.tick_interval seconds and on
POST /admin/tick. Each wake claims what may run (one update per chat at a time, in update_id
order; up to telegram.max_concurrent_chats chats at once), renews the leases of running work,
and acts on stop requests for chats whose work is running. Shutdown cancels running work and
releases its claims so the next process resumes it.

It knows nothing of Telegram: it is handed a `Handler` that does what one update asks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import apsw

from lib.config import Settings
from lib.db import Database
from lib.errors import AshError
from lib.inbox import queue
from lib.retry import Backoff

log = logging.getLogger("ash.inbox")

PRUNE_EVERY = 3600.0
# The message a stop request cancels running work with, so the handler can tell it from a
# shutdown (which cancels with none) and settle what it had shown (asyncio.Task.cancel(msg)).
STOP_REQUESTED = "stop requested"
# A failed update waits 2, 4, 8 ... seconds (at most five minutes) before its next attempt.
RETRY_BACKOFF = Backoff(base=1.0, max_delay=300.0, jitter=False)


class Released(Exception):
    """The handler gives the update back on purpose, to run again in `delay` seconds (an album
    whose other photos are still arriving); not a failure, and no attempt is counted."""

    def __init__(self, delay: float):
        super().__init__(f"released for {delay:.1f} s")
        self.delay = delay


class Permanent(Exception):
    """The handler failed in a way no retry can mend (a revoked token): give up at once."""


class Handler(Protocol):
    """What the worker is handed: the channel's code for one update."""

    async def handle(self, claim: queue.Claim) -> tuple[str, str | None]:
        """Do what the update asks; returns the inbox status ("done", "skipped", ...) and a note."""

    async def may_stop(self, stop_payload: bytes, running: queue.Claim) -> bool:
        """Whether a stop request waiting behind `running` may cancel it (who sent it, to whom)."""

    async def stopped(self, claim: queue.Claim) -> None:
        """A stop request cancelled this update's running work: tell the person."""

    async def gave_up(self, claim: queue.Claim) -> None:
        """The update failed for good (after every attempt): tell the person, once."""

    async def sweep(self) -> None:
        """The channel's periodic work, run with the worker's sweep (requests that timed out)."""


@dataclass
class Job:
    """A running update of one chat."""

    claim: queue.Claim
    task: asyncio.Task | None = None
    renewed_at: float = field(default_factory=time.monotonic)
    stop_requested: bool = False
    lost: bool = False


class InboxWorker:
    """One per server process; see the module docstring."""

    def __init__(
        self,
        db: Database,
        settings: Settings,
        handler: Handler,
        *,
        answering: bool = True,
        worker: str | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self.db = db
        self.settings = settings
        self.config = settings.config.telegram
        self.bot_id = settings.bot_id
        self.handler = handler
        # False without a bot token: updates are kept in the inbox until one is configured.
        self.answering = answering
        self.worker = worker or queue.worker_id()
        # Unix seconds for leases and retry delays (the runtime's clock: tests move it forward).
        self.clock = clock
        self._jobs: dict[int, Job] = {}
        # Updates this process answered but could not mark finished (the database refused the
        # write: disk full). When they come round again they are finished, never answered again.
        self._unrecorded: dict[int, tuple[str, str | None]] = {}
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task | None = None
        # The claim the database is making now, if any (see _claim).
        self._claiming: asyncio.Future | None = None
        self._stopping = False
        self._last_sweep = 0.0
        self._last_prune = 0.0

    async def _db(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run `fn(conn, ...)` in a worker thread with that thread's connection."""
        return await asyncio.to_thread(lambda: fn(self.db.conn(), *args, **kwargs))

    # -- life cycle -------------------------------------------------------------------------
    async def start(self) -> None:
        """Take over claims of dead processes on this host, then start the loop."""
        if not self.answering:
            log.warning("TELEGRAM_BOT_TOKEN is not set: updates are stored but not answered")
        try:
            await self.sweep()
        except (AshError, apsw.Error) as exc:
            # The loop retries every tick; /readyz reports the database meanwhile.
            log.error("inbox worker: database not usable at start-up: %s", exc)
        self._loop_task = asyncio.create_task(self._loop(), name="ash-inbox-worker")
        self.kick()

    def kick(self) -> None:
        """There may be new work: wake the loop (cheap; safe to call from any handler)."""
        self._wake.set()

    async def stop(self) -> None:
        """Shutdown (SIGTERM): cancel running work and release its claims for the next process."""
        self._stopping = True
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
        if self._claiming is not None:
            # A claim already in the database's hands lands whatever happens; wait for it so the
            # release below frees it too.
            with contextlib.suppress(Exception):
                await self._claiming
        tasks = [job.task for job in self._jobs.values() if job.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        try:
            released = await self._db(queue.release_all, self.bot_id, self.worker)
        except (AshError, apsw.Error) as exc:
            log.error("could not release claims at shutdown (their leases expire instead): %s", exc)
            return
        if released:
            log.info("released %d claimed update(s) for the next process", released)

    async def _loop(self) -> None:
        while not self._stopping:
            try:
                if time.monotonic() - self._last_sweep >= self.settings.config.server.tick_interval:
                    await self.sweep()
                self._wake.clear()  # what arrived before now is in this pump
                await self.pump()
            except Exception:
                log.exception("inbox worker: unexpected error; continuing")
            # Running work needs its lease renewed and stop requests checked about once a second.
            timeout = self.settings.config.server.tick_interval
            if self._jobs:
                timeout = min(timeout, 1.0, self.config.lease_seconds / 3)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)

    async def sweep(self) -> None:
        """Periodic housekeeping: free dead local claims, skip what Ash does not answer, prune."""
        self._last_sweep = time.monotonic()
        freed = await self._db(queue.release_dead, self.bot_id, self.worker)
        if freed:
            log.info("took over %d update(s) claimed by a process that is gone", freed)
        # New rows of these kinds are stored already skipped; this finds those an older version left.
        skipped = await self._db(queue.skip_kinds, self.bot_id)
        if skipped:
            kinds = sorted({row["kind"] for row in skipped})
            log.info("skipped %d update(s) Ash does not answer (%s)", len(skipped), ", ".join(kinds))
        if self.answering:
            try:
                await self.handler.sweep()
            except Exception:
                log.exception("the channel's periodic work failed; it runs again at the next sweep")
        if time.monotonic() - self._last_prune >= PRUNE_EVERY or not self._last_prune:
            self._last_prune = time.monotonic()
            pruned = await self._db(queue.prune, self.config.inbox_retention_days)
            if pruned:
                log.info("pruned %d finished inbox row(s)", pruned)

    async def tick(self) -> dict:
        """POST /admin/tick: sweep and claim now; returns what was started and the inbox counts."""
        await self.sweep()
        claimed = await self.pump()
        return {"claimed": claimed, "running": len(self._jobs), "inbox": await self._db(queue.counts)}

    async def pump(self) -> int:
        """Renew leases, act on stop requests, then claim and start what may run; returns how many started."""
        await self._check_running()
        if not self.answering or self._stopping:
            return 0
        started = 0
        while len(self._jobs) < self.config.max_concurrent_chats:
            claim = await self._claim()
            if claim is None:
                break
            job = Job(claim)
            self._jobs[claim.update_id] = job
            run = self._record_again if claim.update_id in self._unrecorded else self._run
            job.task = asyncio.create_task(run(job), name=f"ash-update-{claim.update_id}")
            started += 1
        return started

    async def _claim(self) -> queue.Claim | None:
        """Claim the next update. A worker thread cannot be cancelled: when shutdown cancels the
        loop mid-claim, the claim still lands, and stop() waits for it (shielded) to release it."""
        self._claiming = asyncio.ensure_future(
            self._db(queue.claim, self.bot_id, self.worker, self.config.lease_seconds, self.clock())
        )
        return await asyncio.shield(self._claiming)

    async def drain(self) -> None:
        """Process until nothing is claimable and nothing runs (tests and `ash` one-shots)."""
        while True:
            started = await self.pump()
            tasks = [job.task for job in self._jobs.values() if job.task is not None]
            if tasks:
                await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            elif not started:
                return

    async def _check_running(self) -> None:
        half = self.config.lease_seconds / 2
        for job in list(self._jobs.values()):
            if job.task is None or job.task.done():
                continue
            if time.monotonic() - job.renewed_at >= half:
                if await self._db(
                    queue.renew, self.bot_id, job.claim.update_id, self.worker, self.config.lease_seconds, self.clock()
                ):
                    job.renewed_at = time.monotonic()
                else:
                    # Someone took the update over after our lease ran out: never answer twice.
                    log.warning("lost the lease on update %s; cancelling its turn", job.claim.update_id)
                    job.lost = True
                    job.task.cancel()
                    continue
            if job.claim.chat_key is not None and job.claim.kind != "stop":
                await self._take_stops(job)

    async def _take_stops(self, job: Job) -> None:
        for row in await self._db(queue.pending_stops, self.bot_id, job.claim.chat_key):
            if not await self.handler.may_stop(row["payload"], job.claim):
                continue  # not theirs to stop: it waits its turn as an ordinary update
            if await self._db(queue.take_pending, self.bot_id, row["update_id"], "stop: cancelled the running turn"):
                log.info("/stop: cancelling update %s in chat %s", job.claim.update_id, job.claim.chat_key)
                job.stop_requested = True
                job.task.cancel(STOP_REQUESTED)
                await self._quietly(self.handler.stopped(job.claim), "telling the chat it stopped")

    # -- one update -------------------------------------------------------------------------
    async def _run(self, job: Job) -> None:
        claim = job.claim
        try:
            try:
                status, note = await self.handler.handle(claim)
            except asyncio.CancelledError:
                if job.stop_requested:
                    await self._finish(claim, "done", "stopped by /stop")
                elif not job.lost and not self._stopping:
                    await self._db(queue.release, self.bot_id, claim.update_id, self.worker, count_attempt=False)
                return
            except Released as released:
                await self._db(
                    queue.release,
                    self.bot_id,
                    claim.update_id,
                    self.worker,
                    delay=released.delay,
                    count_attempt=False,
                    now=self.clock(),
                )
                return
            except Exception as exc:
                await self._failed(claim, exc)
                return
            await self._finish(claim, status, note)
        except Exception:
            # Bookkeeping itself failed (the database refused a write). Logged here: a task
            # must never end with an exception nobody reads. The lease expires; see _finish.
            log.exception("update %s: could not record what happened to it", claim.update_id)
        finally:
            self._jobs.pop(claim.update_id, None)
            self.kick()

    async def _finish(self, claim: queue.Claim, status: str, note: str | None) -> bool:
        """Mark the update handled. If the database refuses (disk full), remember the outcome so
        that when the update comes round again it is marked then, not answered a second time."""
        try:
            finished = await self._db(queue.finish, self.bot_id, claim.update_id, self.worker, status, note)
        except Exception:
            self._unrecorded[claim.update_id] = (status, note)
            raise
        self._unrecorded.pop(claim.update_id, None)
        return finished

    async def _record_again(self, job: Job) -> None:
        """An update answered earlier whose outcome could not be stored: store it now."""
        claim = job.claim
        status, note = self._unrecorded[claim.update_id]
        try:
            await self._finish(claim, status, note)
            log.info("update %s: recorded as %s (it was answered before the database refused)", claim.update_id, status)
        except Exception:
            log.exception("update %s: still cannot record its outcome", claim.update_id)
        finally:
            self._jobs.pop(claim.update_id, None)
            self.kick()

    async def _failed(self, claim: queue.Claim, exc: Exception) -> None:
        error = f"{type(exc).__name__}: {exc}"[:500]
        permanent = isinstance(exc, Permanent | ImportError)
        if claim.attempts < self.config.max_attempts and not permanent:
            delay = RETRY_BACKOFF.delay(claim.attempts)
            log.warning(
                "update %s failed (attempt %d), retrying in %.0f s: %s",
                claim.update_id,
                claim.attempts,
                delay,
                error,
                # Ash's own errors say what happened; anything else is a bug and needs its traceback.
                exc_info=not isinstance(exc, AshError),
            )
            await self._db(
                queue.release, self.bot_id, claim.update_id, self.worker, delay=delay, error=error, now=self.clock()
            )
            return
        log.error("update %s failed for good after %d attempts: %s", claim.update_id, claim.attempts, error)
        # finish() succeeds once per update, so the person is told once.
        if await self._finish(claim, "failed", error):
            await self._quietly(self.handler.gave_up(claim), "telling the chat it failed")

    @staticmethod
    async def _quietly(call: Awaitable[None], what: str) -> None:
        # A notice that cannot be delivered must not turn a handled update into a failed one.
        try:
            await call
        except Exception as exc:
            log.info("%s did not work: %s", what, exc)
