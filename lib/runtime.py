"""Process-wide plain data: settings, the database, the HTTP client, the model clients, and the
signals one part of the process gives another.

The server builds one in its lifespan (lib/web/lifespan.py) and keeps it on `app.state`; the
CLI builds one per command. Nothing here starts work or looks anything up: whatever needs a
service is handed it by the code that wires the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from lib.config import Settings
from lib.db import Database

log = logging.getLogger("ash")


def new_http_client() -> httpx.AsyncClient:
    """The client for the Bot API and web tools (one per process: connections are reused)."""
    return httpx.AsyncClient(timeout=httpx.Timeout(30.0, connect=10.0))


class Warmup:
    """What the first turn needs, loaded on a thread of its own after start-up.

    The first turn imports the agent, the tools and a model SDK (`import anthropic` takes 5 s on
    two busy cores): done on the event loop, nothing else is served meanwhile (no webhook, no
    /healthz, no other chat). Here the imports run on a thread while the loop serves; whatever
    needs them awaits `ready()`, which never blocks the loop. Importing the same module on the
    loop meanwhile would wait for this thread's import lock, so everything that needs these
    modules waits for `ready()` first.

    The garbage collector is off while it loads, and what is loaded by then is frozen (never
    walked by a collection again): with the SDKs loaded, each full collection walked every
    object they made, holding the GIL, and so the event loop, for 130 to 190 ms (seen in the soak
    as /healthz answers of 150 to 360 ms). `thaw()` undoes it when the server stops."""

    def __init__(self, modules: Sequence[str], prepare: Callable[[], None] | None = None):
        self.modules = tuple(modules)
        self.prepare = prepare
        self._done: asyncio.Event | None = None
        self._begun = False

    def start(self, delay: float = 0.0) -> None:
        """Load on a daemon thread `delay` seconds from now, or at once when something waits for it
        first (call from the event loop). The delay keeps the imports from competing with the
        server's first answers: on two busy cores, loading at once put the first /healthz 200 a
        quarter later (Fly's health check, and Telegram's wait after a deploy)."""
        self._done = asyncio.Event()
        if delay > 0:
            asyncio.get_running_loop().call_later(delay, self.begin)
        else:
            self.begin()

    def begin(self) -> None:
        """Start loading now, unless it has begun (from the event loop)."""
        if self._begun or self._done is None:
            return
        self._begun = True
        loop = asyncio.get_running_loop()
        done = self._done

        def load() -> None:
            gc.disable()
            try:
                for name in self.modules:
                    try:
                        importlib.import_module(name)
                    except Exception:
                        log.warning("warming up: importing %s failed", name, exc_info=True)
                if self.prepare is not None:
                    try:
                        self.prepare()
                    except Exception:
                        log.warning("warming up failed; the first turn builds what it needs", exc_info=True)
            finally:
                gc.freeze()
                gc.enable()
                # The server may have stopped before loading finished (a short-lived test app).
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(done.set)

        threading.Thread(target=load, name="ash-warmup", daemon=True).start()

    async def ready(self) -> None:
        """Return once loading is done (at once when it was never asked for); a waiter that comes
        before the delay is up starts it."""
        if self._done is not None:
            self.begin()
            await self._done.wait()

    @staticmethod
    def thaw() -> None:
        """The server stopped: what the warm-up froze is collectable again (a test process starts
        and stops many apps; frozen garbage would pile up there)."""
        gc.unfreeze()


class Signal:
    """A one-shot notice: whoever cares connects a listener, whoever causes it emits. Listeners
    run at once, in the emitter's thread (the event loop's, for the tools); one that fails is
    logged and the others still run. Without listeners (a CLI command) an emit does nothing."""

    def __init__(self, name: str):
        self.name = name
        self._listeners: list[Callable[[], None]] = []

    def connect(self, listener: Callable[[], None]) -> None:
        """Call `listener` on every emit from now on."""
        self._listeners.append(listener)

    def disconnect(self, listener: Callable[[], None]) -> None:
        """Stop calling `listener` (nothing happens if it was not connected)."""
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    def emit(self) -> None:
        """Tell every listener."""
        for listener in list(self._listeners):
            try:
                listener()
            except Exception:
                log.exception("a listener of %s failed", self.name)


@dataclass
class Signals:
    """What one part of the process tells another without either knowing the other (Litestar's
    events need the app, and the tools that emit these run outside requests and in the CLI)."""

    # A scheduled task was made or cancelled (the schedule tools): the server's scheduler re-arms
    # its timer at once instead of at its next tick.
    schedule_changed: Signal = field(default_factory=lambda: Signal("schedule_changed"))


@dataclass
class Runtime:
    settings: Settings
    db: Database
    # Built on first use: building one loads the CA bundle, ~50 ms that would otherwise delay
    # the server's first answer at start-up (the webhook and health checks never need it).
    http_client: httpx.AsyncClient | None = None
    # LLM provider clients by provider name, built on first use and kept for the process, so a
    # turn reuses the connection (and TLS session) of the previous one.
    llm_providers: dict[str, Any] = field(default_factory=dict)
    # The server's warm-up of what the first turn imports (None: nothing to wait for).
    warmup: Warmup | None = None
    signals: Signals = field(default_factory=Signals)
    # Unix seconds now. Leases, Run / Deny deadlines and the scheduler read the time here, so a
    # test moves it forward instead of sleeping through a timeout.
    clock: Callable[[], float] = time.time

    async def ready(self) -> None:
        """Wait, without blocking the loop, until what the first turn imports is loaded."""
        if self.warmup is not None:
            await self.warmup.ready()

    @property
    def http(self) -> httpx.AsyncClient:
        """The shared HTTP client, built now if nothing used it yet."""
        if self.http_client is None:
            self.http_client = new_http_client()
        return self.http_client

    async def close_http(self) -> None:
        """Close the HTTP client if one was built (at shutdown)."""
        client, self.http_client = self.http_client, None
        if client is not None:
            await client.aclose()

    async def close_llm_providers(self) -> None:
        """Close the LLM clients (at shutdown); closing is best effort."""
        providers, self.llm_providers = list(self.llm_providers.values()), {}
        for provider in providers:
            try:
                await provider.aclose()
            except Exception:
                log.debug("closing an LLM client failed", exc_info=True)
