"""`GET /admin/stats`: counts that tell an operator how the assistant is doing."""

from litestar import Request, get

from lib.web.auth import admin_guard
from lib.web.state import get_runtime
from lib.web.stats import collect_stats


@get("/admin/stats", guards=[admin_guard], sync_to_thread=True)
def admin_stats(request: Request) -> dict:
    """Row counts per table, inbox backlog and database size."""
    runtime = get_runtime(request.app)
    return collect_stats(runtime.db.conn(), runtime.settings.database_path)
