"""`/admin/ui/memories/{id}/forget|edit|keep|discard`, `/admin/ui/audit/{id}/undo`: the web view's writes
(session and CSRF token required)."""

from __future__ import annotations

from typing import Annotated

from litestar import Request, Response, post
from litestar.enums import RequestEncodingType
from litestar.params import Body, FromPath

from lib.memory import correct, forget, knowledge, review
from lib.web.state import get_runtime
from lib.web.ui.http import checked, redirect, refuse

Form = Annotated[dict[str, str], Body(media_type=RequestEncodingType.URL_ENCODED)]
# Who the audit log names for the web view's changes.
ACTOR = "admin:ui"


def _back(entry: knowledge.Knowledge, done: str) -> Response:
    place = f"/admin/ui/people/{entry.owner_user_id}" if entry.owner_user_id else "/admin/ui"
    return redirect(f"{place}?done={done}")


@post("/admin/ui/memories/{memory_id:int}/forget", sync_to_thread=True, include_in_schema=False, status_code=303)
def ui_forget(request: Request, memory_id: FromPath[int], data: Form) -> Response:
    """Forget an entry for real (with the versions it replaced and the messages it came from)."""
    session = checked(request, data)
    if isinstance(session, Response):
        return session
    runtime = get_runtime(request.app)
    conn = runtime.db.conn()
    entry = knowledge.get(conn, memory_id)
    if entry is None or forget.forget_memory(conn, runtime.settings, None, memory_id, ACTOR) is None:
        return refuse(404, f"No memory #{memory_id}.")
    return _back(entry, "forgot")


@post("/admin/ui/memories/{memory_id:int}/edit", sync_to_thread=True, include_in_schema=False, status_code=303)
def ui_edit(request: Request, memory_id: FromPath[int], data: Form) -> Response:
    """Save a corrected version: a new entry that supersedes this one (kept, linked, audited)."""
    session = checked(request, data)
    if isinstance(session, Response):
        return session
    runtime = get_runtime(request.app)
    conn = runtime.db.conn()
    entry = knowledge.get(conn, memory_id)
    if entry is None:
        return refuse(404, f"No memory #{memory_id}.")
    text = data.get("content", "")
    if not text.strip() or len(text) > 20_000:
        return refuse(400, "A memory needs some text (at most 20,000 characters).")
    if " ".join(text.split()) == " ".join(entry.content.split()):
        return _back(entry, "")
    try:
        new_id = correct.correct_entry(
            conn, runtime.settings, memory_id, text, actor=ACTOR, asked_by=entry.owner_user_id or ""
        )
    except ValueError as refused:  # screening refused it (a secret: lib/memory/screen.py)
        return refuse(400, str(refused))
    if new_id is None:
        return refuse(409, f"Memory #{memory_id} was replaced already; edit its newest version.")
    return _back(entry, "edited")


def _review(request: Request, memory_id: int, data: dict, keep: bool) -> Response:
    session = checked(request, data)
    if isinstance(session, Response):
        return session
    runtime = get_runtime(request.app)
    decide = review.keep if keep else review.discard
    entry = decide(runtime.db.conn(), runtime.settings, memory_id, actor=ACTOR)
    if entry is None:
        return refuse(409, f"Memory #{memory_id} does not wait for review.")
    return _back(entry, "kept" if keep else "discarded")


@post("/admin/ui/memories/{memory_id:int}/keep", sync_to_thread=True, include_in_schema=False, status_code=303)
def ui_keep(request: Request, memory_id: FromPath[int], data: Form) -> Response:
    """Keep an entry that waits for review: it becomes active (lib/memory/review.py)."""
    return _review(request, memory_id, data, keep=True)


@post("/admin/ui/memories/{memory_id:int}/discard", sync_to_thread=True, include_in_schema=False, status_code=303)
def ui_discard(request: Request, memory_id: FromPath[int], data: Form) -> Response:
    """Discard an entry that waits for review: kept as a row, never used."""
    return _review(request, memory_id, data, keep=False)


@post("/admin/ui/audit/{audit_id:int}/undo", sync_to_thread=True, include_in_schema=False, status_code=303)
def ui_undo(request: Request, audit_id: FromPath[int], data: Form) -> Response:
    """Take back one audited change (lib/memory/undo.py); a change that cannot be undone says why."""
    session = checked(request, data)
    if isinstance(session, Response):
        return session
    from lib.memory import undo

    runtime = get_runtime(request.app)
    done = undo.undo(runtime.db.conn(), runtime.settings, audit_id, actor=ACTOR)
    if not done.ok:
        return refuse(409, done.message[0].upper() + done.message[1:] + ".")
    return redirect("/admin/ui/audit?done=undone")
