"""`POST /admin/tick`: run the update processor's sweep now (an external cron may call it)."""

from litestar import Request, post
from litestar.exceptions import ServiceUnavailableException

from lib.admin_auth import admin_guard
from lib.processor import get_processor
from lib.runtime import get_runtime


@post("/admin/tick", guards=[admin_guard], status_code=200)
async def admin_tick(request: Request) -> dict:
    """Release stale claims, prune old inbox rows and start pending updates; returns the inbox counts."""
    processor = get_processor(get_runtime(request.app))
    if processor is None:
        raise ServiceUnavailableException("the update processor is not running")
    return await processor.tick()
