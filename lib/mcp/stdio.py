"""`ash mcp serve --user ID`: Ash's MCP server over stdin/stdout for a local client.

Whoever can start this command can read the database file anyway, so there is no token: the
process serves the one person named on its command line. Writes are audited as `mcp:stdio`.
Nothing but MCP messages may reach stdout: logs go to stderr, and the SDK points file
descriptor 1 at stderr while it serves, writing the protocol through a copy of its own.

Every line read is checked first (lib/mcp/envelope.py): a line that is not one well-formed
JSON-RPC message is answered here with its JSON-RPC error (the SDK's own reader dropped such
lines without a word, so the client waited for an answer that never came) and never reaches
the server; an `initialize` asking for a version this server does not offer asks for the
newest instead. Blank lines are skipped.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import AsyncIterator
from io import TextIOWrapper
from typing import Any

import anyio
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import ErrorData, JSONRPCError
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from lib.config import Settings
from lib.db import Database
from lib.mcp import envelope
from lib.mcp.server import build_server
from lib.mcp.tokens import Principal


class _Borrowed(TextIOWrapper):
    """A text view of stdin that leaves stdin open when it is dropped."""

    def close(self) -> None:
        with contextlib.suppress(ValueError):
            self.detach()


class CheckedLines:
    """The lines the SDK reads: good messages pass, a bad one is answered with its error here."""

    def __init__(self, source: Any):
        self._source = source
        self._answers: Any = None
        self._ready = anyio.Event()

    def answer_with(self, write_stream: Any) -> None:
        """Where refusals go: the SDK's own write stream, so they reach stdout like any answer."""
        self._answers = write_stream
        self._ready.set()

    async def __aiter__(self) -> AsyncIterator[str]:
        async for line in self._source:
            if not line.strip():
                continue
            message = envelope.check(line)
            if isinstance(message, envelope.Problem):
                await self._ready.wait()
                error = ErrorData(code=message.code, message=message.message)
                await self._answers.send(SessionMessage(JSONRPCError(jsonrpc="2.0", id=message.id, error=error)))
                continue
            asked = envelope.offered(message, LATEST_HANDSHAKE_VERSION)
            yield line if asked is message else json.dumps(asked) + "\n"


async def serve_stdio(settings: Settings, user_id: str, *, read_only: bool = False) -> None:
    """Serve `user_id`'s memory over stdio until the client closes stdin."""
    db = Database(settings.database_path)
    try:
        server = build_server(settings, db, Principal(user_id=user_id, name="stdio", read_only=read_only))
        lines = CheckedLines(anyio.wrap_file(_Borrowed(sys.stdin.buffer, encoding="utf-8", errors="replace")))
        async with stdio_server(stdin=lines) as (read_stream, write_stream):
            lines.answer_with(write_stream)
            # What MCPServer.run_stdio_async does, with the checked lines as stdin (the SDK has no
            # public hook for its reader, so its low-level server is run directly).
            lowlevel = server._lowlevel_server
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
    finally:
        db.close()
