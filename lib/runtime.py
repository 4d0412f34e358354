"""Process-wide state for the web app: settings, database, HTTP client, background work.

Created in the Litestar lifespan and kept on `app.state`; handlers read it from there and
hold no state of their own.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
from litestar import Litestar

from lib.config import Settings, load_settings
from lib.db import Database

log = logging.getLogger("ash")


def new_http_client() -> httpx.AsyncClient:
    """The client for the Bot API and web tools (one per process: connections are reused)."""
    return httpx.AsyncClient(timeout=httpx.Timeout(30.0, connect=10.0))


@dataclass
class Runtime:
    settings: Settings
    db: Database
    # Built on first use: building one loads the CA bundle, ~50 ms that would otherwise delay
    # the server's first answer at start-up (the webhook and health checks never need it).
    http_client: httpx.AsyncClient | None = None
    # Background services started by the lifespan (the update processor, timers, ...).
    services: list[Any] = field(default_factory=list)
    # Stores webhook updates with group commit (lib/inbox_writer.py); None outside the server.
    inbox_writer: Any = None
    # LLM provider clients by provider name, built on first use and kept for the process, so a
    # turn reuses the connection (and TLS session) of the previous one.
    llm_providers: dict[str, Any] = field(default_factory=dict)

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


def get_runtime(app: Litestar) -> Runtime:
    """The runtime the lifespan put on the app."""
    return app.state.runtime


@asynccontextmanager
async def lifespan(app: Litestar) -> AsyncIterator[None]:
    """Open shared resources at start-up and close them at shutdown."""
    settings = load_settings()
    from lib.redact import install

    install(settings.secrets)
    runtime = Runtime(settings=settings, db=Database(settings.database_path))
    app.state.runtime = runtime
    if not settings.secrets.telegram_webhook_secret:
        log.warning("TELEGRAM_WEBHOOK_SECRET is not set: the webhook refuses every update (403) until it is")
    try:
        from lib.services import start_services

        await start_services(runtime)
        yield
    finally:
        for service in reversed(runtime.services):
            await service.stop()
        await runtime.close_llm_providers()
        await runtime.close_http()
        runtime.db.close()
