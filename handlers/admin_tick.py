"""`POST /admin/tick`: fire due scheduled tasks and run the inbox worker's sweep now (an external
cron may call it)."""

from litestar import Request, post
from litestar.exceptions import ServiceUnavailableException

from lib.web.auth import admin_guard
from lib.web.state import get_services


@post("/admin/tick", guards=[admin_guard], status_code=200)
async def admin_tick(request: Request) -> dict:
    """Fire due scheduled tasks, release stale claims, prune old inbox rows and start pending
    updates; returns the inbox counts (and how many scheduled runs were queued)."""
    services = get_services(request.app)
    if services.inbox_worker is None:
        raise ServiceUnavailableException("the inbox worker is not running")
    scheduled = await services.scheduler.tick() if services.scheduler is not None else 0
    return {**await services.inbox_worker.tick(), "scheduled": scheduled}
