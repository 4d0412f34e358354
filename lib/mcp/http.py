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

from lib.config import Settings
from lib.db import Database
from lib.mcp import tokens
from lib.mcp.server import build_server

NO_HOST_CHECKS = TransportSecuritySettings(enable_dns_rebinding_protection=False)
REFUSALS = {
    tokens.Refusal.DISABLED: "MCP is not enabled: create a token with `ash mcp token create --user ID`",
    tokens.Refusal.UNAUTHORIZED: "missing, wrong, revoked or expired bearer token",
}


def _authorization(scope: Scope) -> str | None:
    for key, value in scope.get("headers", []):
        if key == b"authorization":
            return value.decode("latin-1")
    return None


async def _refuse(send: Send, refusal: tokens.Refusal) -> None:
    body = json.dumps({"status_code": refusal.value, "detail": REFUSALS[refusal]}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if refusal is tokens.Refusal.UNAUTHORIZED:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": refusal.value, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def serve(scope: Scope, receive: Receive, send: Send, *, settings: Settings, db: Database) -> None:
    """Answer one MCP request for the person its bearer token belongs to."""
    header = _authorization(scope)
    principal = await asyncio.to_thread(lambda: tokens.authenticate(db.conn(), header))
    if isinstance(principal, tokens.Refusal):
        await _refuse(send, principal)
        return
    server = build_server(settings, db, principal)
    server.streamable_http_app(json_response=True, stateless_http=True, transport_security=NO_HOST_CHECKS)
    manager = server.session_manager
    async with manager.run():
        await manager.handle_request(scope, receive, send)
