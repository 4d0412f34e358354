"""Ash's web app: routes, lifespan and exception handlers. Logic lives in `lib/`."""

from litestar import Litestar

from handlers.admin_stats import admin_stats
from handlers.admin_tick import admin_tick
from handlers.health import healthz, readyz
from handlers.telegram_webhook import telegram_webhook
from lib.http_errors import EXCEPTION_HANDLERS
from lib.runtime import lifespan

app = Litestar(
    route_handlers=[healthz, readyz, admin_stats, telegram_webhook, admin_tick],
    lifespan=[lifespan],
    exception_handlers=EXCEPTION_HANDLERS,
)
