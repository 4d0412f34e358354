"""`/mcp`: Ash's memory as an MCP server (Streamable HTTP), for the person a bearer token names.

The MCP SDK loads on the first request to this path, never at start-up or on the webhook's path.
"""

from litestar import asgi
from litestar.types import Receive, Scope, Send

from lib.web.state import get_auth_limiter, get_runtime


@asgi("/mcp", is_mount=True, copy_scope=True)
async def mcp_endpoint(scope: Scope, receive: Receive, send: Send) -> None:
    """Serve one MCP request: 403 when MCP was never enabled, 401 for a bad token, 429 after too
    many unknown ones from the client."""
    from lib.conversation.access import still_allowed
    from lib.mcp.http import serve

    app = scope["app"]
    runtime = get_runtime(app)
    await serve(
        scope,
        receive,
        send,
        settings=runtime.settings,
        db=runtime.db,
        limiter=get_auth_limiter(app),
        allowed=lambda conn, user_id: still_allowed(conn, runtime.settings, user_id),
    )
