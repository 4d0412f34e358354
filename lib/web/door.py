"""The body door: no request body reaches the app unless it arrived whole, in time, within the
limit, and no one without a credential can hold more than a few of the server's connections.

granian serves at most `[server] max_connections` connections at once (its backpressure), and a
connection whose body is still arriving holds one. 1,100 clients trickling the sign-in form a
byte every 5 s kept /healthz and the webhook from answering for as long as they liked. So, in
front of every route (lib/web/fast_path.py and Litestar behind it):

- A request without a body (no Content-Length, or 0, and no Transfer-Encoding: granian speaks
  HTTP/1 only, lib/commands/serve.py) goes straight in.
- The webhook guards itself: it checks its secret header before reading its body within the
  same limits (handlers/telegram_webhook.py), so the door lets it through untouched (reading
  the body twice, each under a timer, cost about a fifth of its acknowledgement).
- Any other route that takes a credential checks it before any body is read: the admin API its
  bearer token, /mcp its token (shaped as `ash mcp token create` makes them, then looked up),
  the web view its session cookie. A client past the limit on failed
  authentications (lib/auth_limit.py) counts as refused. A refused request reaches its route
  with an empty body, so the route answers its usual 401, 403 or 429 without reading anything,
  and the connection is closed after the answer.
- A request that may send a body without any credential (the sign-in form, a web view form
  without a live session, any other path) needs one of `OPEN_BODIES` places first; when all are
  taken it is answered 503 at once, with Connection: close.
- Every body that is read must arrive whole within `[server] body_timeout` seconds and
  `max_body_bytes`, else 408 or 413 and the connection is closed. The route then reads it from
  memory.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Awaitable, Callable

import msgspec
from litestar import Litestar
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from lib.errors import Rejected
from lib.web.auth import bearer_matches
from lib.web.body import ClientGone, header, read_limited
from lib.web.state import get_auth_limiter, get_runtime

log = logging.getLogger("ash.web")

# Bodies read at once for requests that carry no credential: a small part of the server's
# connections ([server] max_connections, 4,096 by default), so they never crowd out the webhook.
OPEN_BODIES = 16
# Seconds between two warnings that the open places are full (an attack logs one line a minute).
WARN_EVERY = 60.0


class Verdict(enum.Enum):
    """What a route's credential says before the body is read."""

    SIGNED = "signed"  # present and right: read the body
    REFUSED = "refused"  # missing, wrong or limited: the route refuses without a body
    OPEN = "open"  # the route takes none before its body: one of the open places


Check = Callable[[Litestar, Scope], Awaitable[Verdict]]
# A route that checks its own credential first and reads its own body within the same limits.
GUARDS_ITSELF = None


def under(path: str, prefix: str) -> bool:
    """Whether `path` is `prefix` or below it."""
    return path == prefix or path.startswith(prefix + "/")


def has_body(scope: Scope) -> bool:
    """Whether an HTTP/1 request carries a body (RFC 9112: a length, or chunks)."""
    length = header(scope, b"content-length")
    if length is not None:
        return length.strip() not in (b"0", b"")
    return header(scope, b"transfer-encoding") is not None


def _client_limited(app: Litestar, scope: Scope) -> bool:
    limiter = get_auth_limiter(app)
    return limiter.retry_after(limiter.client(scope)) > 0


async def admin_check(app: Litestar, scope: Scope) -> Verdict:
    """The admin bearer token (lib/web/auth.py admin_guard decides the answer)."""
    expected = get_runtime(app).settings.secrets.admin_token
    if not expected or _client_limited(app, scope):
        return Verdict.REFUSED
    given = (header(scope, b"authorization") or b"").decode("latin-1")
    return Verdict.SIGNED if bearer_matches(given, expected) else Verdict.REFUSED


async def mcp_check(app: Litestar, scope: Scope) -> Verdict:
    """An MCP token of the right shape, then found in the token table (on a thread)."""
    from lib.conversation.access import still_allowed
    from lib.mcp import tokens

    given = (header(scope, b"authorization") or b"").decode("latin-1")
    if _client_limited(app, scope) or not tokens.well_formed(given):
        return Verdict.REFUSED
    runtime = get_runtime(app)

    def allowed(conn, user_id: str) -> bool:
        return still_allowed(conn, runtime.settings, user_id)

    def look_up() -> bool:
        return isinstance(tokens.check(runtime.db.conn(), given, allowed=allowed), tokens.Principal)

    return Verdict.SIGNED if await asyncio.to_thread(look_up) else Verdict.REFUSED


async def web_view_check(app: Litestar, scope: Scope) -> Verdict:
    """A live session cookie (on a thread); without one a form is an open request, and the
    sign-in of a client past the limit is refused before its form is read."""
    from lib.web.ui import sessions

    runtime = get_runtime(app)
    token = runtime.settings.secrets.admin_token
    if not token:
        return Verdict.REFUSED
    raw = _cookie(scope, sessions.COOKIE)
    if raw and await asyncio.to_thread(lambda: sessions.is_live(runtime.db.conn(), raw, token)):
        return Verdict.SIGNED
    if scope["path"].startswith("/admin/ui/signin") and _client_limited(app, scope):
        return Verdict.REFUSED
    return Verdict.OPEN


def _cookie(scope: Scope, name: str) -> str | None:
    for key, value in scope["headers"]:
        if key != b"cookie":
            continue
        for part in value.decode("latin-1").split(";"):
            found, _, content = part.strip().partition("=")
            if found == name:
                return content
    return None


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body as one message, then whatever the connection says (a disconnect)."""
    given = False

    async def replay() -> Message:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _no_body() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}


def _closing(send: Send) -> Send:
    """`send` with Connection: close on the response (its body was never read, or not whole)."""

    async def closing(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"connection"]
            message = {**message, "headers": [*headers, (b"connection", b"close")]}
        await send(message)

    return closing


async def _answer(send: Send, status: int, detail: str, headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
    body = msgspec.json.encode({"status_code": status, "detail": detail})
    start = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body)), *headers]
    await send({"type": "http.response.start", "status": status, "headers": [*start, (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


class BodyDoor:
    """Counts the open places in use (one server process, one event loop: no lock needed)."""

    def __init__(self, app: Litestar, inner: ASGIApp, rules: list[tuple[str, Check | None]], *, open_bodies: int):
        self.app = app
        self.inner = inner
        self.rules = rules
        self.open_bodies = open_bodies
        self.reading_open = 0
        self.turned_away = 0
        self.warned_at = -WARN_EVERY

    def rule(self, path: str) -> tuple[bool, Check | None]:
        """(whether the route guards itself, the check of its credential if it takes one)."""
        for prefix, check in self.rules:
            if under(path, prefix):
                return check is GUARDS_ITSELF, check
        return False, None

    async def verdict(self, scope: Scope, check: Check | None) -> Verdict:
        """What the route's credential says; a route without one, or a check that fails (the
        database is gone, say), is open: bounded, and the route answers for itself."""
        if check is None:
            return Verdict.OPEN
        try:
            return await check(self.app, scope)
        except Exception as exc:
            log.warning("%s: credential check failed (%s); treated as without one", scope["path"], exc)
            return Verdict.OPEN

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not has_body(scope):
            await self.inner(scope, receive, send)
            return
        itself, check = self.rule(scope["path"])
        if itself:
            await self.inner(scope, receive, send)
            return
        verdict = await self.verdict(scope, check)
        if verdict is Verdict.REFUSED:
            await self.inner(scope, _no_body, _closing(send))
            return
        if verdict is Verdict.OPEN:
            if self.reading_open >= self.open_bodies:
                self._turned_away()
                await _answer(send, 503, "too many uploads in progress; retry shortly", ((b"retry-after", b"5"),))
                return
            self.reading_open += 1
        try:
            server = get_runtime(self.app).settings.config.server
            body = await read_limited(scope, receive, server.max_body_bytes, server.body_timeout)
        except ClientGone:
            return  # nobody to answer
        except Rejected as exc:
            await _answer(send, exc.status, exc.detail)
            return
        finally:
            if verdict is Verdict.OPEN:
                self.reading_open -= 1
        await self.inner(scope, _replay(body, receive), send)

    def _turned_away(self) -> None:
        self.turned_away += 1
        now = time.monotonic()
        if now - self.warned_at >= WARN_EVERY:
            log.warning(
                "all %d places for bodies without a credential are taken: %d request(s) answered 503 "
                "since the last warning (slow uploads from strangers?)",
                self.open_bodies,
                self.turned_away,
            )
            self.warned_at, self.turned_away = now, 0


def with_body_door(app: Litestar, inner: ASGIApp, webhook_path: str, *, open_bodies: int = OPEN_BODIES) -> ASGIApp:
    """`inner` behind the body door (see the module's docstring); `webhook_path` is Telegram's."""
    rules: list[tuple[str, Check | None]] = [
        (webhook_path, GUARDS_ITSELF),
        ("/admin/ui", web_view_check),
        ("/admin", admin_check),
        ("/mcp", mcp_check),
    ]
    return BodyDoor(app, inner, rules, open_bodies=open_bodies)
