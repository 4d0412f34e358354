"""The server's memory housekeeping: gc at start-up (`auto_gc`), then on a timer (and when
kicked after a turn) the vectors of newly stored turns and the fact extractions that are due,
and once a day, in the owner's quiet hour (lib/memory/daily.py), the expiry of unreviewed
pending memories and consolidation (its duplicate check, then its model pass), whose new
proposals are announced to their reviewers."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from lib.config import Settings
from lib.db import Database

log = logging.getLogger("ash.memory.service")

# Seconds between looks at the extraction queue; the debounce itself is per user.
POLL_SECONDS = 5.0
# How often the service asks whether the daily pass is due (lib/memory/daily.py decides).
DAILY_CHECK_SECONDS = 60.0
# Hands the channel the announcements waiting (lib/memory/daily.py): the server's wiring queues
# a review message for each reviewer outside their quiet hours; memory itself knows no channel.
Announce = Callable[[], Awaitable[None]]
# The most tokens one answer of memory's model may hold.
MAX_ANSWER_TOKENS = 1024


class MemoryService:
    """Runs gc once at start, then embeds new turns and runs due extractions."""

    def __init__(
        self,
        db: Database,
        settings: Settings,
        *,
        complete: Callable[..., Awaitable[str]],
        announce: Announce | None = None,
        poll_seconds: float = POLL_SECONDS,
        clock: Callable[[], float] = time.time,
    ):
        self.db = db
        self.settings = settings
        # How memory reaches a model: `complete(system=, prompt=, model=, user_id=, purpose=)`
        # -> text, handed in by the server's wiring (memory itself knows no model client).
        self._complete = complete
        self._announce = announce
        self.poll_seconds = poll_seconds
        self._clock = clock
        self._task: asyncio.Task | None = None
        self._wake = asyncio.Event()
        self._daily_check = time.monotonic()

    def kick(self) -> None:
        """A turn was stored: embed it now rather than at the next poll."""
        self._wake.set()

    async def complete(
        self,
        *,
        system: str,
        prompt: str,
        user_id: str | None,
        purpose: str = "extraction",
        max_tokens: int = MAX_ANSWER_TOKENS,
    ) -> str:
        """Ask the configured model (extraction_model, else the default) for a fact extraction, or
        for what `purpose` names (consolidation): usage is recorded under it."""
        return await self._complete(
            system=system,
            prompt=prompt,
            model=self.settings.config.memory.extraction_model,
            user_id=user_id,
            purpose=purpose,
            max_tokens=max_tokens,
        )

    async def start(self) -> None:
        """Start housekeeping in the background: serving does not wait for gc or the model."""
        self._task = asyncio.create_task(self._loop(), name="memory-housekeeping")

    async def collect_garbage(self) -> None:
        """Garbage-collect once (at start-up when `auto_gc`); a failure is logged, not raised."""
        from lib.memory import gc

        try:
            counts = await asyncio.to_thread(lambda: gc.collect(self.db.conn(), self.settings))
            log.info("memory gc at start-up: %s", counts)
        except Exception:
            log.exception("memory gc at start-up failed; continuing")

    async def embed_pending(self) -> int:
        """Embed chunks stored without a vector (new turns); returns how many."""
        from lib.memory.search import index

        total = 0
        while True:
            done = await asyncio.to_thread(lambda: index.backfill_vectors(self.db.conn(), self.settings))
            total += done
            if done < index.REINDEX_BATCH:
                return total

    async def daily(self) -> None:
        """The daily pass: discard what waited for review past `pending_days`, look for duplicate
        facts to consolidate ([memory] consolidate), ask the model for contradicted and stale ones
        (within `consolidate_daily_tokens`), then announce new proposals to their reviewers. A
        failure is logged, not raised; the pass counts as done either way (tried again tomorrow)."""
        from lib.memory import consolidate, consolidate_model, daily, review

        settings = self.settings
        before = await asyncio.to_thread(lambda: daily.newest_proposal(self.db.conn()))

        def chores() -> dict:
            conn = self.db.conn()
            return {"unreviewed": review.expire_pending(conn, settings), **consolidate.propose(conn, settings)}

        def done() -> None:
            conn = self.db.conn()
            if settings.config.memory.consolidate == "propose":
                daily.note_announcements(conn, daily.to_announce(conn, settings, before))
            daily.mark_done(conn, self._clock())

        try:
            log.info("memory daily pass: %s", await asyncio.to_thread(chores))
        except Exception:
            log.exception("memory daily pass failed; trying again tomorrow")
        try:
            log.info("consolidation's model pass: %s", await consolidate_model.run(self.db, settings, self.complete))
        except Exception:
            log.exception("consolidation's model pass failed; trying again tomorrow")
        await asyncio.to_thread(done)

    async def daily_if_due(self) -> None:
        """Once a minute: delete the forgets held for Undo whose window closed, run the daily pass
        when lib/memory/daily.py says it is due, then hand the channel the announcements waiting."""
        from lib.memory import daily, holds

        if time.monotonic() < self._daily_check:
            return
        self._daily_check = time.monotonic() + DAILY_CHECK_SECONDS
        await asyncio.to_thread(lambda: holds.purge_expired(self.db.conn(), self.settings, self._clock()))
        if await asyncio.to_thread(lambda: daily.is_due(self.db.conn(), self.settings, self._clock())):
            await self.daily()
        if self._announce is not None:
            try:
                await self._announce()
            except Exception:
                log.exception("announcing consolidation's proposals failed; trying again in a minute")

    async def run_once(self) -> list:
        """Embed new turns, then run the extractions that are due now (their reports)."""
        from lib.memory import extraction

        await self.daily_if_due()
        await self.embed_pending()
        if not self.settings.config.memory.extraction_enabled:
            return []
        return await extraction.run_due(self.db, self.settings, self.complete)

    async def _loop(self) -> None:
        if self.settings.config.memory.auto_gc:
            await self.collect_garbage()
        while True:
            try:
                await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                # A bad row or a database hiccup must not stop housekeeping for everyone.
                log.exception("memory housekeeping pass failed; trying again shortly")
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.poll_seconds)

    async def stop(self) -> None:
        """Stop the timer (an extraction in flight is cancelled and retried on the next start)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
