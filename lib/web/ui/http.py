"""The web view's request side: who is signed in, and responses with its security headers.

Handlers call `signed_in` first: no admin token configured refuses everything (403, as the
admin API does); no live session sends a page to the sign-in form (303) and refuses a write
(403). The bearer token of the JSON API does not open these pages: only the session does.
"""

from __future__ import annotations

from litestar import Request, Response
from litestar.datastructures import Cookie

from lib.web.state import get_runtime
from lib.web.ui import sessions
from lib.web.ui.render import HEADERS

SIGNIN = "/admin/ui/signin"
DISABLED = "The web view is off: set ASH_ADMIN_TOKEN to enable it."


def respond(
    body: str | bytes,
    *,
    status: int = 200,
    media_type: str = "text/html; charset=utf-8",
    cookies=(),
    headers: dict[str, str] | None = None,
) -> Response:
    """A response with the web view's headers (no-store, CSP, no framing) and `headers`, setting
    `cookies`."""
    # Cookie attributes come whole from lib/web/ui/sessions.py `cookie`.
    return Response(
        content=body,
        status_code=status,
        media_type=media_type,
        headers={**HEADERS, **(headers or {})},
        cookies=[Cookie(**attributes) for attributes in cookies],
    )


def redirect(location: str, *, cookies=()) -> Response:
    """303 to `location` (after a form, and to the sign-in page)."""
    response = respond(b"", status=303, media_type="text/plain", cookies=cookies)
    response.headers["Location"] = location
    return response


def refuse(status: int, text: str) -> Response:
    """A refusal as plain text (nothing of the page it guards)."""
    return respond(text, status=status, media_type="text/plain; charset=utf-8")


def admin_token(request: Request) -> str | None:
    """The configured admin token, or None (the web view is then off)."""
    return get_runtime(request.app).settings.secrets.admin_token or None


def signed_in(request: Request) -> sessions.UiSession | None:
    """The request's live session, or None."""
    token = admin_token(request)
    if token is None:
        return None
    return sessions.current(get_runtime(request.app).db.conn(), request.cookies.get(sessions.COOKIE), token)


def gate(request: Request, *, write: bool) -> sessions.UiSession | Response:
    """The session, or the response that refuses the request."""
    if admin_token(request) is None:
        return refuse(403, DISABLED)
    session = signed_in(request)
    if session is not None:
        return session
    return refuse(403, "Sign in first.") if write else redirect(SIGNIN)


def checked(request: Request, form: dict[str, str]) -> sessions.UiSession | Response:
    """The session of a write whose form carries its CSRF token, or the refusal (403)."""
    session = gate(request, write=True)
    if isinstance(session, Response):
        return session
    if not sessions.csrf_ok(session.raw, form.get("csrf")):
        return refuse(
            403, "This form is stale or was not sent by this page (CSRF token missing or wrong). Reload and try again."
        )
    return session


def secure(request: Request) -> bool:
    """Whether cookies get the Secure flag (all but plain http on loopback)."""
    return sessions.needs_secure(
        request.client.host if request.client else None, request.url.scheme, request.headers.get("host", "")
    )
