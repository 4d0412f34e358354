"""`/admin/ui` pages: people, a person's memories and sessions, a session, the audit trail, usage."""

from __future__ import annotations

import time
from typing import Annotated

from litestar import Request, Response, get
from litestar.params import FromPath, Parameter

from lib.web.state import get_runtime
from lib.web.ui.http import gate, refuse, respond
from lib.web.ui.sessions import UiSession


def _page(request: Request, signed: UiSession, template: str, **context) -> Response:
    from lib.web.ui.render import render

    notice = {
        "forgot": "Forgotten.",
        "edited": "Saved as a new version; the old one is kept, replaced.",
        "kept": "Kept: it is used from now on.",
        "discarded": "Discarded: it will not be used.",
        "undone": "Undone: the memory is as it was before that change.",
    }
    html = render(
        template, signed_in=True, csrf=signed.csrf, notice=notice.get(request.query_params.get("done", "")), **context
    )
    return respond(html)


@get("/admin/ui", sync_to_thread=True, include_in_schema=False)
def ui_people(request: Request) -> Response:
    """Everyone Ash knows, with counts."""
    session = gate(request, write=False)
    if isinstance(session, Response):
        return session
    from lib.web.ui import pages

    runtime = get_runtime(request.app)
    return _page(request, session, "people.html", people=pages.people(runtime.db.conn(), runtime.settings))


@get("/admin/ui/people/{user_id:str}", sync_to_thread=True, include_in_schema=False)
def ui_person(request: Request, user_id: FromPath[str], q: Annotated[str, Parameter(max_length=500)] = "") -> Response:
    """One person: notes, memories (searchable; edit and forget), sessions."""
    session = gate(request, write=False)
    if isinstance(session, Response):
        return session
    from lib.web.ui import pages

    runtime = get_runtime(request.app)
    found = pages.person(runtime.db.conn(), runtime.settings, user_id, q)
    if found is None:
        return refuse(404, f"Nobody with id {user_id}.")
    profile = found["profile"]
    who = profile.display_name or (f"@{profile.username}" if profile.username else f"user {user_id}")
    return _page(request, session, "person.html", who=who, q=q, **found)


@get("/admin/ui/sessions/{session_id:int}", sync_to_thread=True, include_in_schema=False)
def ui_session(request: Request, session_id: FromPath[int]) -> Response:
    """One conversation's messages."""
    session = gate(request, write=False)
    if isinstance(session, Response):
        return session
    from lib.web.ui import pages

    found = pages.session(get_runtime(request.app).db.conn(), session_id)
    if found is None:
        return refuse(404, f"No session {session_id}.")
    return _page(request, session, "session.html", **found)


@get("/admin/ui/audit", sync_to_thread=True, include_in_schema=False)
def ui_audit(
    request: Request,
    memory_id: Annotated[int | None, Parameter(ge=1)] = None,
    actor: Annotated[str | None, Parameter(max_length=200)] = None,
) -> Response:
    """The audit trail, for one memory or one actor when asked."""
    session = gate(request, write=False)
    if isinstance(session, Response):
        return session
    from lib.web.ui import pages

    conn = get_runtime(request.app).db.conn()
    entries = pages.audit_trail(conn, memory_id=memory_id, actor=actor)
    from lib.memory import holds
    from lib.memory.undo import UNDOABLE

    # A forget made from /why can be undone while its hold lasts (lib/memory/holds.py).
    held = holds.holding(conn, time.time())
    return _page(
        request, session, "audit.html", entries=entries, memory_id=memory_id, actor=actor, undoable=UNDOABLE, held=held
    )


@get("/admin/ui/usage", sync_to_thread=True, include_in_schema=False)
def ui_usage(request: Request) -> Response:
    """Cost per day as a chart, and the numbers."""
    session = gate(request, write=False)
    if isinstance(session, Response):
        return session
    from lib.web.ui import pages

    return _page(request, session, "usage.html", **pages.usage(get_runtime(request.app).db.conn()))
