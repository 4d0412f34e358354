"""The server's memory housekeeping: gc at start-up (`auto_gc`) and due fact extractions on a timer."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from lib.memory import extraction, gc

if TYPE_CHECKING:
    from lib.runtime import Runtime

log = logging.getLogger("ash.memory.service")

# Seconds between looks at the extraction queue; the debounce itself is per user.
POLL_SECONDS = 5.0


class MemoryService:
    """Runs gc once at start and extraction whenever a user's debounce has passed."""

    def __init__(self, runtime: Runtime, *, poll_seconds: float = POLL_SECONDS):
        self.runtime = runtime
        self.poll_seconds = poll_seconds
        self._task: asyncio.Task | None = None

    async def complete(self, *, system: str, prompt: str, user_id: str) -> str:
        """Ask the configured model (extraction_model, else the default) through the shared router."""
        from lib.llm.router import complete_text

        return await complete_text(
            self.runtime,
            system=system,
            prompt=prompt,
            model=self.runtime.settings.config.memory.extraction_model,
            user_id=user_id,
            purpose="extraction",
        )

    async def start(self) -> None:
        """Collect garbage (if `auto_gc`) and start the extraction timer."""
        settings = self.runtime.settings
        if settings.config.memory.auto_gc:
            try:
                counts = await asyncio.to_thread(lambda: gc.collect(self.runtime.db.conn(), settings))
                log.info("memory gc at start-up: %s", counts)
            except Exception:
                log.exception("memory gc at start-up failed; continuing")
        if settings.config.memory.extraction_enabled:
            self._task = asyncio.create_task(self._loop(), name="memory-extraction")

    async def run_once(self) -> list[extraction.Report]:
        """Run the extractions that are due now."""
        return await extraction.run_due(self.runtime.db, self.runtime.settings, self.complete)

    async def _loop(self) -> None:
        while True:
            try:
                await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                # A bad row or a database hiccup must not stop extraction for everyone.
                log.exception("memory extraction pass failed; trying again shortly")
            await asyncio.sleep(self.poll_seconds)

    async def stop(self) -> None:
        """Stop the timer (an extraction in flight is cancelled and retried on the next start)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
