"""`/admin/ui/signin` and `/admin/ui/signout`: the admin token in, a session cookie out."""

from __future__ import annotations

import asyncio
import secrets
from typing import Annotated

from litestar import Request, Response, get, post
from litestar.enums import RequestEncodingType
from litestar.params import Body

from lib.web.state import get_auth_limiter, get_runtime
from lib.web.ui import sessions
from lib.web.ui.http import admin_token, gate, redirect, refuse, respond, secure, signed_in

Form = Annotated[dict[str, str], Body(media_type=RequestEncodingType.URL_ENCODED)]
TOO_MANY = "Too many failed sign-ins from your address: try again in {minutes} min."
WRONG = "That is not the admin token."


def _form(
    request: Request, *, error: str | None = None, status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    from lib.web.ui.render import render

    # Before a session exists, the form's CSRF token is bound to a short-lived random cookie.
    pre = secrets.token_urlsafe(24)
    html = render("signin.html", signed_in=False, notice=None, error=error, csrf=sessions.csrf_for(pre, "signin"))
    cookie = sessions.cookie(sessions.PRE_COOKIE, pre, secure=secure(request), max_age=sessions.PRE_LIFETIME)
    return respond(html, status=status, cookies=[cookie], headers=headers)


@get("/admin/ui/signin", include_in_schema=False)
async def signin_page(request: Request) -> Response:
    """The sign-in form (or the people page when already signed in)."""
    return await asyncio.to_thread(_signin_page, request)


def _signin_page(request: Request) -> Response:
    if admin_token(request) is None:
        return refuse(403, "The web view is off: set ASH_ADMIN_TOKEN to enable it.")
    if signed_in(request) is not None:
        return redirect("/admin/ui")
    return _form(request)


@post("/admin/ui/signin", include_in_schema=False, status_code=303)
async def signin(request: Request, data: Form) -> Response:
    """Check the token (rate-limited, constant-time) and open a session."""
    return await asyncio.to_thread(_signin, request, data)


def _signin(request: Request, data: dict[str, str]) -> Response:
    token = admin_token(request)
    if token is None:
        return refuse(403, "The web view is off: set ASH_ADMIN_TOKEN to enable it.")
    # The limit first: it needs no form, so a refused client's body is never read (lib/web/door.py).
    limiter = get_auth_limiter(request.app)
    who = limiter.client(request.scope)
    if wait := limiter.retry_after(who):
        error = TOO_MANY.format(minutes=-(-wait // 60))
        return _form(request, error=error, status=429, headers={"Retry-After": str(wait)})
    if not sessions.csrf_ok(request.cookies.get(sessions.PRE_COOKIE), data.get("csrf"), "signin"):
        return refuse(403, "This form is stale or was not sent by this page. Reload and try again.")
    if not sessions.token_ok(token, data.get("token", "")):
        limiter.failed(who)
        return _form(request, error=WRONG, status=401)
    raw = sessions.open_session(get_runtime(request.app).db.conn(), token)
    tls = secure(request)
    return redirect(
        "/admin/ui",
        cookies=[
            sessions.cookie(sessions.COOKIE, raw, secure=tls, max_age=sessions.LIFETIME),
            sessions.cookie(sessions.PRE_COOKIE, "", secure=tls, max_age=0),
        ],
    )


@post("/admin/ui/signout", sync_to_thread=True, include_in_schema=False, status_code=303)
def signout(request: Request, data: Form) -> Response:
    """Revoke the session (CSRF-checked, like every write) and clear the cookie."""
    session = gate(request, write=True)
    if isinstance(session, Response):
        return session
    if not sessions.csrf_ok(session.raw, data.get("csrf")):
        return refuse(403, "This form is stale. Reload and try again.")
    sessions.revoke(get_runtime(request.app).db.conn(), session.raw)
    return redirect(
        "/admin/ui/signin", cookies=[sessions.cookie(sessions.COOKIE, "", secure=secure(request), max_age=0)]
    )
