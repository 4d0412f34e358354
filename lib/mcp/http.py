"""`/mcp`: Ash's MCP server over Streamable HTTP, stateless, with JSON responses.

Each request is checked against the token table, then served by a server built for that
token's person and a session manager that lives only as long as the request (stateless mode:
no session id, nothing kept in memory between requests), so any process, or a restarted one,
answers any request.

DNS-rebinding protection (a Host/Origin allow-list) is off: Ash is reached under its public
name, and the protection guards servers without authentication, while every request here needs
a bearer token that a web page cannot know.
"""

from __future__ import annotations

import asyncio
import json

from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import Receive, Scope, Send

from lib.auth_limit import AuthLimiter
from lib.config import Settings
from lib.db import Database
from lib.mcp import tokens
from lib.mcp.server import build_server

NO_HOST_CHECKS = TransportSecuritySettings(enable_dns_rebinding_protection=False)
DISABLED = "MCP is not enabled: create a token with `ash mcp token create --user ID`"
UNAUTHORIZED = "missing, wrong, revoked or expired bearer token"


def _authorization(scope: Scope) -> str | None:
    for key, value in scope.get("headers", []):
        if key == b"authorization":
            return value.decode("latin-1")
    return None


async def _refuse(send: Send, status: int, detail: str, headers: list[tuple[bytes, bytes]]) -> None:
    body = json.dumps({"status_code": status, "detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


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
    client = limiter.client(scope)
    if wait := limiter.retry_after(client):
        detail = f"too many wrong tokens from this address; retry in {wait} s"
        await _refuse(send, 429, detail, [(b"retry-after", str(wait).encode())])
        return
    header = _authorization(scope)
    principal = await asyncio.to_thread(lambda: tokens.authenticate(db.conn(), header, allowed=allowed))
    if isinstance(principal, tokens.Refusal):
        if principal is tokens.Refusal.DISABLED:
            await _refuse(send, 403, DISABLED, [])
            return
        if principal is tokens.Refusal.UNKNOWN:
            limiter.failed(client)
        await _refuse(send, 401, UNAUTHORIZED, [(b"www-authenticate", b"Bearer")])
        return
    server = build_server(settings, db, principal)
    server.streamable_http_app(json_response=True, stateless_http=True, transport_security=NO_HOST_CHECKS)
    manager = server.session_manager
    async with manager.run():
        await manager.handle_request(scope, receive, send)
