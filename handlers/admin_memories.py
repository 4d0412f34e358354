"""`/admin/memories`: list, search, create and delete knowledge entries."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from litestar import Request, delete, get, post
from litestar.exceptions import NotFoundException, ValidationException
from litestar.params import FromPath, JSONBody, Parameter

from lib.memory import forget, knowledge
from lib.web.auth import admin_guard
from lib.web.state import get_runtime


class MemoryList(msgspec.Struct):
    items: list[knowledge.Knowledge]
    count: int


# Whose entry: a string, or a Telegram id as a JSON number (the ids Telegram sends are numbers).
UserId = Annotated[str, msgspec.Meta(min_length=1, max_length=64)] | Annotated[int, msgspec.Meta(ge=1)]


class MemoryCreate(msgspec.Struct, forbid_unknown_fields=True):
    """A new entry: for one user (`user_id`) or for everyone (`is_global`)."""

    content: Annotated[str, msgspec.Meta(min_length=1, max_length=20_000)]
    user_id: UserId | None = None
    is_global: bool = False
    subject: Annotated[str, msgspec.Meta(max_length=200)] | None = None
    confidence: Annotated[float, msgspec.Meta(ge=0, le=1)] = 1.0
    expires_at: Annotated[str, msgspec.Meta(description="ISO 8601 date/time or a span like 7d")] | None = None


class ForgetResult(msgspec.Struct):
    """What a delete removed: the entry, older versions it superseded, and their source messages."""

    memory_ids: list[int]
    message_ids: list[int]
    memories: int
    messages: int


# The description is given here as well as in the docstring: Litestar wraps the first of two
# sync handlers on one path twice, and /schema would describe the wrapper instead.
@get(
    "/admin/memories",
    guards=[admin_guard],
    sync_to_thread=True,
    description="List entries newest first, or search what a user may see with `q`.",
)
def list_memories(
    request: Request,
    user_id: Annotated[str | None, Parameter(description="Only this user's entries (and global ones with q).")] = None,
    q: Annotated[str | None, Parameter(description="Search text (hybrid search); needs user_id or an owner.")] = None,
    limit: Annotated[int, Parameter(ge=1, le=500, description="Most entries returned.")] = 50,
    include_inactive: Annotated[
        bool, Parameter(description="Also superseded and expired entries, and every status.")
    ] = False,
    status: Annotated[
        Literal["active", "pending", "discarded"] | None,
        Parameter(
            description="Only entries with this status: pending ones wait for review (written with outside content)."
        ),
    ] = None,
) -> MemoryList:
    """List entries newest first (each with its `status` and `origin`), or search what a user may see with `q`."""
    runtime = get_runtime(request.app)
    conn, settings = runtime.db.conn(), runtime.settings
    if q is not None and q.strip():
        asker = user_id or (str(settings.config.owner) if settings.config.owner is not None else None)
        if asker is None:
            raise ValidationException("searching with q needs user_id (no owner is configured)")
        from lib.memory.api import search_knowledge

        results = search_knowledge(conn, settings, user_id=asker, query=q, limit=limit)
        items = [e.found(r.score) for r in results if (e := knowledge.get(conn, r.id)) is not None]
    else:
        entries = knowledge.list_entries(
            conn, owner_user_id=user_id, include_inactive=include_inactive, limit=limit, status=status
        )
        items = entries
    return MemoryList(items=items, count=len(items))


@post("/admin/memories", guards=[admin_guard], sync_to_thread=True)
def create_memory(request: Request, data: JSONBody[MemoryCreate]) -> knowledge.Knowledge:
    """Store a knowledge entry (201)."""
    runtime = get_runtime(request.app)
    conn = runtime.db.conn()
    owner = None if data.user_id is None else str(data.user_id)
    try:
        memory_id = knowledge.add(
            conn,
            runtime.settings,
            data.content,
            owner_user_id=owner,
            is_global=data.is_global,
            subject=data.subject,
            confidence=data.confidence,
            expires_at=data.expires_at,
            source="admin",
        )
    except ValueError as exc:
        raise ValidationException(str(exc)) from None
    return knowledge.get(conn, memory_id)


@delete("/admin/memories/{memory_id:int}", guards=[admin_guard], sync_to_thread=True, status_code=200)
def delete_memory(request: Request, memory_id: FromPath[int]) -> ForgetResult:
    """Forget an entry for real: it, the versions it superseded, the messages they came from, their index."""
    runtime = get_runtime(request.app)
    result = forget.forget_memory(runtime.db.conn(), runtime.settings, None, memory_id, "admin")
    if result is None:
        raise NotFoundException(f"no memory with id {memory_id}")
    return ForgetResult(
        memory_ids=result["memory_ids"],
        message_ids=result["message_ids"],
        memories=result["memories"],
        messages=result["messages"],
    )
