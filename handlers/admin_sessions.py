"""`/admin/sessions`: conversations and their messages."""

from __future__ import annotations

from typing import Annotated

import msgspec
from litestar import Request, get
from litestar.exceptions import NotFoundException
from litestar.params import FromPath, Parameter

from lib.memory import browse, store
from lib.web.auth import admin_guard
from lib.web.state import get_runtime


class SessionOut(msgspec.Struct):
    id: int
    provider: str
    chat_id: str
    chat_type: str
    user_id: str
    title: str | None
    created_at: str
    updated_at: str
    closed_at: str | None
    has_summary: bool
    message_count: int


class SessionList(msgspec.Struct):
    items: list[SessionOut]
    count: int


class SessionMessages(msgspec.Struct):
    session: SessionOut
    messages: list[store.StoredMessage]


@get("/admin/sessions", guards=[admin_guard], sync_to_thread=True)
def list_sessions(
    request: Request,
    user_id: Annotated[str | None, Parameter(description="Sessions this user started or wrote in.")] = None,
    limit: Annotated[int, Parameter(ge=1, le=500, description="Most sessions returned.")] = 50,
) -> SessionList:
    """Sessions, most recently active first."""
    conn = get_runtime(request.app).db.conn()
    items = [SessionOut(**s) for s in browse.sessions(conn, user_id=user_id, limit=limit)]
    return SessionList(items=items, count=len(items))


@get("/admin/sessions/{session_id:int}/messages", guards=[admin_guard], sync_to_thread=True)
def session_messages(
    request: Request,
    session_id: FromPath[int],
    after_id: Annotated[int, Parameter(ge=0, description="Only messages with a larger id (paging).")] = 0,
    limit: Annotated[int, Parameter(ge=1, le=1000, description="Most messages returned.")] = 200,
) -> SessionMessages:
    """A session and its messages in order."""
    conn = get_runtime(request.app).db.conn()
    found = browse.session(conn, session_id)
    if found is None:
        raise NotFoundException(f"no session with id {session_id}")
    messages = browse.session_messages(conn, session_id, after_id=after_id, limit=limit)
    return SessionMessages(session=SessionOut(**found), messages=messages)
