"""`/admin/users`: who Ash knows and their access; one person's profile and notes; taking access away."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from litestar import Request, delete, get, put
from litestar.exceptions import HTTPException, NotFoundException, ValidationException
from litestar.params import FromPath, JSONBody

from lib.conversation import access
from lib.errors import InvalidUserEntry, OwnerProtected
from lib.memory import browse, knowledge, store
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
    facts: list[knowledge.Knowledge]
    username: str | None = None
    display_name: str | None = None
    timezone: str | None = None
    created_at: str | None = None
    updated_at: str | None = None


class AccessEntry(msgspec.Struct):
    """One line of the access lists: `entry` (an id or @name) from `source`, allowing or denying."""

    entry: str
    source: Literal["config", "cli", "admin"]
    kind: Literal["allow", "deny"]


class PersonOut(msgspec.Struct):
    """Someone Ash knows of; `user_id` is null for an @name no one has written with yet."""

    user_id: str | None
    access: Literal["owner", "allowed", "denied", "none"]
    entries: list[AccessEntry]
    username: str | None = None
    display_name: str | None = None
    timezone: str | None = None


class PeopleOut(msgspec.Struct):
    items: list[PersonOut]
    count: int


class DeniedOut(msgspec.Struct):
    """A denial: the entry, the id it holds, whether config.toml still lists them (it loses), and
    how many scheduled tasks of theirs were removed and MCP tokens revoked."""

    entry: str
    user_id: str | None
    in_config: bool
    schedules_removed: int = 0
    mcp_tokens_revoked: int = 0


class NotesIn(msgspec.Struct, forbid_unknown_fields=True):
    notes: Annotated[str, msgspec.Meta(max_length=20_000)]


def _user(request: Request, user_id: str) -> UserOut:
    conn = get_runtime(request.app).db.conn()
    summary = browse.user_summary(conn, user_id)
    if summary is None:
        raise NotFoundException(f"Ash holds nothing about user {user_id}")
    facts = knowledge.active_facts(conn, user_id)
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


@get("/admin/users", guards=[admin_guard], sync_to_thread=True)
def list_users(request: Request) -> PeopleOut:
    """Everyone Ash knows of: the owner, allowed and denied people, and anyone with a profile."""
    runtime = get_runtime(request.app)
    items = msgspec.convert(access.people(runtime.db.conn(), runtime.settings), list[PersonOut])
    return PeopleOut(items=items, count=len(items))


@delete("/admin/users/{user_id:str}/access", guards=[admin_guard], sync_to_thread=True, status_code=200)
def deny_user(request: Request, user_id: FromPath[str]) -> DeniedOut:
    """Take a person's access away (numeric id or @name); their data is kept. The owner: 409."""
    runtime = get_runtime(request.app)
    conn = runtime.db.conn()
    try:
        done = access.deny(conn, runtime.settings, user_id, source="admin")
    except InvalidUserEntry as exc:
        raise ValidationException(str(exc)) from None
    except OwnerProtected as exc:
        raise HTTPException(status_code=409, detail=str(exc)) from None
    store.audit(conn, "admin", "deny", done.entry)
    return DeniedOut(
        entry=done.entry,
        user_id=done.user_id,
        in_config=done.in_config,
        schedules_removed=done.schedules_removed,
        mcp_tokens_revoked=done.mcp_tokens_revoked,
    )
