"""The server's memory housekeeping: gc at start-up (`auto_gc`), then on a timer (and when
kicked after a turn) the vectors of newly stored turns and the fact extractions that are due,
and once a day the expiry of unreviewed pending memories and consolidation (its duplicate check,
then its model pass)."""

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
# The daily chores (review expiry, consolidation): at the first pass, then every 24 hours.
DAY_SECONDS = 24 * 3600.0
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
        poll_seconds: float = POLL_SECONDS,
    ):
        self.db = db
        self.settings = settings
        # How memory reaches a model: `complete(system=, prompt=, model=, user_id=, purpose=)`
        # -> text, handed in by the server's wiring (memory itself knows no model client).
        self._complete = complete
        self.poll_seconds = poll_seconds
        self._task: asyncio.Task | None = None
        self._wake = asyncio.Event()
        self._daily_due = time.monotonic()

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
        """Once a day: discard what waited for review past `pending_days`, look for duplicate
        facts to consolidate ([memory] consolidate), then ask the model for contradicted and stale
        ones (within `consolidate_daily_tokens`). A failure is logged, not raised."""
        from lib.memory import consolidate, consolidate_model, review

        def chores() -> dict:
            conn = self.db.conn()
            return {
                "unreviewed": review.expire_pending(conn, self.settings),
                **consolidate.propose(conn, self.settings),
            }

        try:
            log.info("memory daily pass: %s", await asyncio.to_thread(chores))
        except Exception:
            log.exception("memory daily pass failed; trying again tomorrow")
        try:
            log.info(
                "consolidation's model pass: %s", await consolidate_model.run(self.db, self.settings, self.complete)
            )
        except Exception:
            log.exception("consolidation's model pass failed; trying again tomorrow")

    async def run_once(self) -> list:
        """Embed new turns, then run the extractions that are due now (their reports)."""
        from lib.memory import extraction

        if time.monotonic() >= self._daily_due:
            self._daily_due = time.monotonic() + DAY_SECONDS
            await self.daily()
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
