"""Process-wide plain data: settings, the database, the HTTP client, the model clients.

The server builds one in its lifespan (lib/web/lifespan.py) and keeps it on `app.state`; the
CLI builds one per command. Nothing here starts work or looks anything up: whatever needs a
service is handed it by the code that wires the process.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import httpx

from lib.config import Settings
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
