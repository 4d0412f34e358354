"""Ash's one retry helper: exponential backoff with jitter that honours a server's retry-after.

Every client that retries (the Bot API, the model providers, web search) and the inbox worker
(a failed update waits before its next attempt) take their delays from `Backoff`; the clients
that retry in place also share the loop in `retry`.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

Sleep = Callable[[float], Awaitable[object]]


@dataclass(frozen=True)
class Backoff:
    """Delays between attempts: `base * 2**attempt`, capped at `max_delay`, with jitter.

    Jitter (a random 50-100 % of the delay) keeps parallel chats from retrying in lockstep. A
    server's `retry_after` is honoured as given, unless it exceeds `max_delay`: then the caller
    should give up (or switch to a fallback) rather than wait that long."""

    base: float = 1.0
    max_delay: float = 30.0
    jitter: bool = True

    def delay(self, attempt: int, retry_after: float | None = None) -> float | None:
        """Seconds to wait before retry `attempt` (0-based), or None to stop retrying."""
        if retry_after is not None:
            return retry_after if retry_after <= self.max_delay else None
        wait = min(self.max_delay, self.base * 2**attempt)
        return wait * (0.5 + random.random() / 2) if self.jitter else wait  # noqa: S311 (not for secrets)


@dataclass(frozen=True)
class Retryable:
    """What `classify` answers for an error worth another attempt (`after`: the server's wait)."""

    after: float | None = None


async def retry[T](
    call: Callable[[], Awaitable[T]],
    *,
    retries: int,
    backoff: Backoff,
    classify: Callable[[Exception], Retryable | None],
    sleep: Sleep = asyncio.sleep,
    on_error: Callable[[Exception, int], Awaitable[None] | None] | None = None,
) -> T:
    """`await call()`, retried up to `retries` times while `classify(error)` says Retryable.

    `on_error(error, attempt)` sees every failure first (for logging, or to take back half an
    answer); an error that is not retryable, or the last one, is raised unchanged."""
    attempt = 0
    while True:
        try:
            return await call()
        except Exception as exc:
            if on_error is not None:
                pending = on_error(exc, attempt)
                if pending is not None:
                    await pending
            verdict = classify(exc)
            if verdict is None or attempt >= retries:
                raise
            wait = backoff.delay(attempt, verdict.after)
            if wait is None:
                raise
            await sleep(wait)
            attempt += 1
