"""`GET /admin/export`: one user's data, or everyone's, as JSON."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import Request, get
from litestar.params import Parameter

from lib.memory import browse, store
from lib.web.auth import admin_guard
from lib.web.state import get_runtime


class ExportOut(msgspec.Struct):
    """Canonical rows (index tables are rebuildable and left out)."""

    exported_at: str
    user_id: str | None
    profiles: list[dict[str, Any]]
    sessions: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    memories: list[dict[str, Any]]


@get("/admin/export", guards=[admin_guard], sync_to_thread=True)
def admin_export(
    request: Request,
    user_id: Annotated[str | None, Parameter(description="Only this user (default: everyone).")] = None,
) -> ExportOut:
    """Profiles, sessions, messages and knowledge of one user (plus global knowledge) or of all users."""
    runtime = get_runtime(request.app)
    data = browse.export(runtime.db.conn(), user_id)
    store.audit(runtime.db.conn(), "admin", "export", user_id or "all", messages=len(data["messages"]))
    return ExportOut(**data)
