"""`ash mcp serve --user ID`: Ash's MCP server over stdin/stdout for a local client.

Whoever can start this command can read the database file anyway, so there is no token: the
process serves the one person named on its command line. Writes are audited as `mcp:stdio`.
Nothing but MCP messages may reach stdout: logs go to stderr.
"""

from __future__ import annotations

from lib.config import Settings
from lib.db import Database
from lib.mcp.server import build_server
from lib.mcp.tokens import Principal


async def serve_stdio(settings: Settings, user_id: str, *, read_only: bool = False) -> None:
    """Serve `user_id`'s memory over stdio until the client closes stdin."""
    db = Database(settings.database_path)
    try:
        server = build_server(settings, db, Principal(user_id=user_id, name="stdio", read_only=read_only))
        await server.run_stdio_async()
    finally:
        db.close()
