"""`POST /admin/reload`: read config.toml and secrets.env again and apply them without a restart."""

from litestar import Request, post
from litestar.exceptions import ClientException

from lib.errors import ConfigError
from lib.web.auth import admin_guard
from lib.web.reload import reload
from lib.web.state import get_runtime


@post("/admin/reload", guards=[admin_guard], status_code=200)
async def admin_reload(request: Request) -> dict:
    """Apply the files as they are now; answers what changed (key and secret names, never values)
    and what waits for a restart. A file that does not parse changes nothing (400, with the reason)."""
    try:
        result = await reload(get_runtime(request.app))
    except ConfigError as exc:
        raise ClientException(f"nothing reloaded: {exc}") from None
    return {"reloaded": True, "changed": result.changed, "restart_needed": result.restart_needed}
