"""`POST /admin/tick`: run the update processor's sweep now (an external cron may call it)."""

from litestar import Request, post
from litestar.exceptions import ServiceUnavailableException

from lib.web.auth import admin_guard
from lib.web.state import get_services


@post("/admin/tick", guards=[admin_guard], status_code=200)
async def admin_tick(request: Request) -> dict:
    """Release stale claims, prune old inbox rows and start pending updates; returns the inbox counts."""
    processor = get_services(request.app).processor
    if processor is None:
        raise ServiceUnavailableException("the update processor is not running")
    return await processor.tick()
