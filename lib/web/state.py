"""What the lifespan keeps on the Litestar app, and typed accessors for handlers."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

from litestar import Litestar

if TYPE_CHECKING:  # the services load when the lifespan starts them, not when a handler is imported
    from lib.auth_limit import AuthLimiter
    from lib.inbox.group_commit import InboxWriter
    from lib.inbox.scheduler import Scheduler
    from lib.inbox.worker import InboxWorker
    from lib.memory.service import MemoryService
    from lib.runtime import Runtime


@dataclass
class Services:
    """The background services one server process runs; each is None until started."""

    writer: InboxWriter | None = None
    inbox_worker: InboxWorker | None = None
    memory: MemoryService | None = None
    # Fires scheduled tasks into the inbox; started a little after start-up by `scheduler_start`.
    scheduler: Scheduler | None = None
    scheduler_start: asyncio.Task | None = None
    # Brings Telegram's command menu up to date once, a little after start-up.
    command_menu: asyncio.Task | None = None
    # Applies a changed config.toml or secrets.env (lib/web/reload.py).
    config_watch: asyncio.Task | None = None


def get_runtime(app: Litestar) -> Runtime:
    """The runtime the lifespan put on the app."""
    return app.state.runtime


def get_services(app: Litestar) -> Services:
    """The services the lifespan started (empty ones under a test client without a lifespan)."""
    services = app.state.get("services")
    return services if services is not None else Services()


def get_auth_limiter(app: Litestar) -> AuthLimiter:
    """The one limit on failed authentications (admin API, web view sign-in, /mcp)."""
    return app.state.auth_limiter
