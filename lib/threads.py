"""Thread pools of their own for long blocking calls, so they never hold the default executor.

asyncio.to_thread runs on the event loop's default executor: min(32, cores + 4) threads, six on
two cores, shared with every database hop (quick apsw calls, but each needs a free thread). A
sandbox command holds a thread for up to [sandbox] timeout, a local transcription for seconds;
a few at once, and everyone's database hops (so every chat) waited behind them. Such calls run
in a `Pool` of their own: its size bounds how many run at once, and a call waiting for one of its
threads holds nothing. (Parsing untrusted files holds no thread at all: lib/senses/parsing.py.)
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor


class Pool:
    """At most `workers` blocking calls at once, in threads named `name`-N, started on demand."""

    def __init__(self, name: str, workers: int):
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)

    async def run[T](self, fn: Callable[..., T], /, *args, **kwargs) -> T:
        """`fn(*args, **kwargs)` in one of the pool's threads, with this task's context (as
        asyncio.to_thread does). Cancelling the caller does not stop a call already running."""
        call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)
