"""`/admin/users/{user_id}`: what Ash holds about a person, and their profile notes."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import Request, get, put
from litestar.exceptions import NotFoundException
from litestar.params import FromPath, JSONBody

from lib.memory import browse, knowledge, store
from lib.web.api import MemoryOut, memory_out
from lib.web.auth import admin_guard
from lib.web.state import get_runtime


class UserCounts(msgspec.Struct):
    messages: int
    memories: int
    active_memories: int
    sessions: int


class UserOut(msgspec.Struct):
    user_id: str
    notes: str
    preferences: dict[str, Any]
    counts: UserCounts
    facts: list[MemoryOut]
    username: str | None = None
    display_name: str | None = None
    timezone: str | None = None
    created_at: str | None = None
    updated_at: str | None = None


class NotesIn(msgspec.Struct, forbid_unknown_fields=True):
    notes: Annotated[str, msgspec.Meta(max_length=20_000)]


def _user(request: Request, user_id: str) -> UserOut:
    conn = get_runtime(request.app).db.conn()
    summary = browse.user_summary(conn, user_id)
    if summary is None:
        raise NotFoundException(f"Ash holds nothing about user {user_id}")
    facts = [memory_out(f) for f in knowledge.active_facts(conn, user_id)]
    fields = {k: summary.get(k) for k in ("username", "display_name", "timezone", "created_at", "updated_at")}
    return UserOut(
        user_id=user_id,
        notes=summary["notes"],
        preferences=summary["preferences"],
        counts=UserCounts(**summary["counts"]),
        facts=facts,
        **fields,
    )


@get("/admin/users/{user_id:str}", guards=[admin_guard], sync_to_thread=True)
def get_user(request: Request, user_id: FromPath[str]) -> UserOut:
    """A user's profile, counts and active facts (404 when Ash holds nothing about them)."""
    return _user(request, user_id)


@put("/admin/users/{user_id:str}/notes", guards=[admin_guard], sync_to_thread=True)
def put_user_notes(request: Request, user_id: FromPath[str], data: JSONBody[NotesIn]) -> UserOut:
    """Replace a user's profile notes (the profile is created if needed)."""
    runtime = get_runtime(request.app)
    conn = runtime.db.conn()
    store.set_notes(conn, user_id, data.notes)
    store.audit(conn, "admin", "set_notes", user_id, length=len(data.notes))
    return _user(request, user_id)
