"""`GET /admin/audit`: the audit trail, newest first (who or what changed memory, and why)."""

from __future__ import annotations

from typing import Annotated

import msgspec
from litestar import Request, get
from litestar.params import Parameter

from lib.memory import audit
from lib.web.auth import admin_guard
from lib.web.state import get_runtime


class AuditList(msgspec.Struct):
    items: list[audit.AuditEntry]
    count: int
    # Pass as before_id for the next (older) page; None on the last page.
    next_before_id: int | None


@get("/admin/audit", guards=[admin_guard], sync_to_thread=True)
def list_audit(
    request: Request,
    memory_id: Annotated[int | None, Parameter(ge=1, description="Only changes to this entry.")] = None,
    actor: Annotated[str | None, Parameter(max_length=200, description="e.g. admin, cli, mcp (any mcp:NAME)")] = None,
    action: Annotated[str | None, Parameter(max_length=100, description="e.g. memory_add, forget_memory")] = None,
    target: Annotated[str | None, Parameter(max_length=200, description="Whose memory: a user id, or global.")] = None,
    before_id: Annotated[int | None, Parameter(ge=1, description="Rows older than this id (paging).")] = None,
    limit: Annotated[int, Parameter(ge=1, le=500, description="Most rows returned.")] = 100,
) -> AuditList:
    """Audit rows newest first, filtered by entry, actor, action or target."""
    conn = get_runtime(request.app).db.conn()
    items = audit.entries(
        conn, actor=actor, action=action, target=target, memory_id=memory_id, before_id=before_id, limit=limit
    )
    return AuditList(items=items, count=len(items), next_before_id=items[-1].id if len(items) == limit else None)
