"""`/mcp`: Ash's MCP server over Streamable HTTP, stateless, with JSON responses.

Each request is checked against the token table, then served by a server built for that
token's person and a session manager that lives only as long as the request (stateless mode:
no session id, nothing kept in memory between requests), so any process, or a restarted one,
answers any request.

Before the SDK sees a request, in this order:
- `Origin` (MCP, Streamable HTTP: servers MUST validate it and answer 403 when it is present
  and invalid, against DNS rebinding). Allowed: no Origin (not a browser), a page served from
  loopback (localhost, 127.0.0.0/8, ::1), and a page of this very server (the Origin's host and
  port are the request's Host). Everything else, `null` included, gets 403. The bearer token
  stays the real defence: a web page cannot know it.
- the method: only POST. A stateless server has no server-to-client stream to offer on GET and
  no session to end on DELETE, so both get 405 with `Allow: POST` (the spec's answer for a
  server without a GET stream) instead of a stream that never sends.
- the token: 403 while MCP was never enabled, 401 for a missing, wrong, revoked or expired one,
  or one whose person may no longer use Ash; a client past the limit of wrong tokens
  (lib/auth_limit.py) gets 429 before its token is looked at.
- `MCP-Protocol-Version`: a version this server does not offer gets 400, as the spec requires.
- the body: one JSON-RPC message (lib/mcp/envelope.py); anything else gets its JSON-RPC error
  (-32700, -32600, -32602) with 400.

The SDK's own Host/Origin allow-list (DNS-rebinding protection) stays off: it knows neither the
public name Ash is reached under nor the loopback pages; the checks above replace it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
from urllib.parse import urlsplit

from mcp.server.transport_security import TransportSecuritySettings
from mcp_types.version import LATEST_HANDSHAKE_VERSION
from starlette.types import Message, Receive, Scope, Send

from lib.auth_limit import AuthLimiter
from lib.config import Settings
from lib.db import Database
from lib.mcp import envelope, tokens
from lib.mcp.server import build_server

NO_HOST_CHECKS = TransportSecuritySettings(enable_dns_rebinding_protection=False)
DISABLED = "MCP is not enabled: create a token with `ash mcp token create --user ID`"
UNAUTHORIZED = "missing, wrong, revoked or expired bearer token"
POST_ONLY = (
    "this MCP server answers POST only: it is stateless, so it offers no server-to-client stream "
    "(GET) and no session to end (DELETE)"
)
DEFAULT_PORTS = {"http": 80, "https": 443}


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin-1")
    return None


def _is_loopback(hostname: str) -> bool:
    if hostname == "localhost" or hostname.endswith(".localhost"):
        return True  # RFC 6761: browsers resolve these to loopback themselves
    try:
        return ipaddress.ip_address(hostname).is_loopback
    except ValueError:
        return False


def origin_allowed(origin: str | None, host: str | None) -> bool:
    """True when a request with this `Origin` may reach the server (see the module docstring)."""
    if origin is None:
        return True
    try:
        parts = urlsplit(origin)
        origin_port = parts.port
    except ValueError:
        return False
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        return False  # "null" (sandboxed frames, file pages) and other schemes
    if _is_loopback(parts.hostname):
        return True
    if not host:
        return False
    try:
        served = urlsplit(f"//{host}")
        served_port = served.port
    except ValueError:
        return False
    default = DEFAULT_PORTS[parts.scheme]
    return served.hostname == parts.hostname and (served_port or default) == (origin_port or default)


async def _answer(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    sent = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *(headers or [])]
    await send({"type": "http.response.start", "status": status, "headers": sent})
    await send({"type": "http.response.body", "body": body})


async def _refuse(send: Send, status: int, detail: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    await _answer(send, status, json.dumps({"status_code": status, "detail": detail}).encode(), headers)


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole body, or None when it is over `limit` bytes or the client went away."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that gives the SDK the body already read, then the connection's own events."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


async def serve(
    scope: Scope,
    receive: Receive,
    send: Send,
    *,
    settings: Settings,
    db: Database,
    limiter: AuthLimiter,
    allowed: tokens.Allowed,
) -> None:
    """Answer one MCP request for the person its bearer token belongs to (`allowed` says whether
    that person may still use Ash). A client with too many unknown tokens lately gets 429."""
    origin = _header(scope, b"origin")
    if not origin_allowed(origin, _header(scope, b"host")):
        await _refuse(send, 403, f"requests from the web page origin {origin[:200]!r} are not accepted")
        return
    if scope.get("method") != "POST":
        await _refuse(send, 405, POST_ONLY, [(b"allow", b"POST")])
        return
    client = limiter.client(scope)
    if wait := limiter.retry_after(client):
        detail = f"too many wrong tokens from this address; retry in {wait} s"
        await _refuse(send, 429, detail, [(b"retry-after", str(wait).encode())])
        return
    header = _header(scope, b"authorization")
    principal = await asyncio.to_thread(lambda: tokens.authenticate(db.conn(), header, allowed=allowed))
    if isinstance(principal, tokens.Refusal):
        if principal is tokens.Refusal.DISABLED:
            await _refuse(send, 403, DISABLED)
            return
        if principal is tokens.Refusal.UNKNOWN:
            limiter.failed(client)
        await _refuse(send, 401, UNAUTHORIZED, [(b"www-authenticate", b"Bearer")])
        return
    version = _header(scope, b"mcp-protocol-version")
    if version in envelope.NOT_OFFERED:
        await _refuse(send, 400, f"MCP protocol version {version} is not offered by this server")
        return
    server_config = settings.config.server
    try:
        async with asyncio.timeout(server_config.body_timeout):
            body = await _read_body(receive, server_config.max_body_bytes)
    except TimeoutError:
        await _refuse(send, 408, f"the body did not arrive within {server_config.body_timeout:g} s")
        return
    if body is None:
        await _refuse(send, 413, f"body over {server_config.max_body_bytes} bytes")
        return
    message = envelope.check(body)
    if isinstance(message, envelope.Problem):
        await _answer(send, 400, message.encoded())
        return
    asked = envelope.offered(message, LATEST_HANDSHAKE_VERSION)
    if asked is not message:
        body = json.dumps(asked).encode()
    server = build_server(settings, db, principal)
    server.streamable_http_app(json_response=True, stateless_http=True, transport_security=NO_HOST_CHECKS)
    manager = server.session_manager
    async with manager.run():
        await manager.handle_request(scope, _replay(body, receive), send)
