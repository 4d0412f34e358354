"""Ash's memory as an MCP server (the official SDK's MCPServer), built for one principal.

A server is built per request (HTTP) or per process (stdio) for the person its token belongs
to, so every tool is bound to that person's memory by construction: no tool takes a user id.
A read-only token's server has only the reading tools. Tool output is JSON text.

Importing this module loads the MCP SDK (about half a second): only /mcp and `ash mcp serve`
do, never the server's start or the webhook.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, ToolAnnotations
from pydantic import Field

from lib.config import Settings
from lib.db import Database
from lib.mcp.memory_access import MAX_LIMIT, MemoryAccess
from lib.mcp.tokens import Principal

INSTRUCTIONS = (
    "Ash's long-term memory of one person: facts they saved and their past conversations with Ash. "
    "Use recall before answering questions about them; remember lasting facts they tell you."
)
READING = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITING = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
DELETING = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)

Query = Annotated[str, Field(min_length=1, description="What to look for, in a few words.")]
Limit = Annotated[int, Field(ge=1, le=MAX_LIMIT, description="How many results at most.")]


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=1)


def unknown_tools_refused(names: set[str]) -> Callable:
    """SDK middleware: a call of a tool this server does not have is the JSON-RPC error the MCP
    spec names for it (-32602, "Unknown tool"), not a tool result flagged isError (the SDK's
    answer), which a client would show as the tool's own output. A read-only token's server has
    no `remember` or `forget`, so calling them is refused the same way."""

    async def middleware(ctx: Any, call_next: Callable) -> Any:
        if ctx.method == "tools/call" and isinstance(ctx.params, dict):
            name = ctx.params.get("name")
            if isinstance(name, str) and name not in names:
                raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool: {name}")
        return await call_next(ctx)

    return middleware


# How a tool runs an operation of MemoryAccess: on a worker thread, with that thread's connection.
Run = Callable[..., Awaitable[Any]]


def build_server(settings: Settings, db: Database, principal: Principal) -> MCPServer:
    """An MCP server whose tools and resources act on `principal`'s memory only."""
    access = MemoryAccess(settings, principal)

    async def run(operation: Callable, *args: Any) -> Any:
        # apsw blocks: the SQL runs on a worker thread with that thread's connection.
        return await asyncio.to_thread(lambda: operation(db.conn(), *args))

    server = MCPServer("ash", instructions=INSTRUCTIONS, log_level="WARNING")
    tools = [(tool, READING) for tool in _reading_tools(run, access)]
    if not principal.read_only:
        tools += _writing_tools(run, access)
    for tool, hints in tools:
        server.add_tool(tool, annotations=hints, structured_output=False)
    server.middleware.append(unknown_tools_refused({tool.__name__ for tool, _ in tools}))
    _add_resources(server, run, access)
    return server


def _reading_tools(run: Run, access: MemoryAccess) -> list[Callable]:
    """The tools that only read the person's memory (the SDK reads their signatures and docstrings)."""

    async def recall(query: Query, limit: Limit = 8) -> str:
        """Search the person's memory (saved facts and past messages) by meaning and by words.
        Results carry ids; a memory's id can be given to `forget`."""
        return _json(await run(access.recall, query, limit))

    async def list_memories(limit: Limit = 20, offset: Annotated[int, Field(ge=0)] = 0) -> str:
        """List the person's saved facts (and global ones), newest first."""
        return _json(await run(access.list_memories, limit, offset))

    async def search_history(query: Query, limit: Limit = 10) -> str:
        """Search the person's past messages with Ash (their own chats only)."""
        return _json(await run(access.search_history, query, limit))

    async def export() -> str:
        """Everything Ash keeps of the person: profile, their chats' sessions and messages, saved facts."""
        return _json(await run(access.export))

    return [recall, list_memories, search_history, export]


def _writing_tools(run: Run, access: MemoryAccess) -> list[tuple[Callable, Any]]:
    """The tools that change the person's memory, with their hints (a read-only token has none)."""

    async def remember(
        content: Annotated[str, Field(min_length=1, description="The fact or note, as one sentence.")],
        expires_at: Annotated[
            str | None, Field(description="When it stops being true: ISO 8601 (2026-05-01) or a span (12h, 7d, 2w).")
        ] = None,
    ) -> str:
        """Save a lasting fact, preference or note about the person. Saving what is already there
        strengthens that entry instead of adding a copy."""
        try:
            return _json(await run(access.remember, content, expires_at))
        except ValueError as exc:
            raise ToolError(str(exc)) from None

    async def forget(
        id: Annotated[int, Field(description="The memory id, as recall or list_memories show it.")],
    ) -> str:
        """Delete one saved fact for good, with the older versions it replaced and the messages it came from."""
        result = await run(access.forget, id)
        if result is None:
            raise ToolError(f"no memory #{id} of this person; nothing was deleted")
        return _json({"deleted_memory_ids": result["memory_ids"], "deleted_messages": result["messages"]})

    return [(remember, WRITING), (forget, DELETING)]


def _add_resources(server: MCPServer, run: Run, access: MemoryAccess) -> None:
    """The person's profile notes and recent conversations, as resources."""

    @server.resource("ash://profile/notes", name="profile-notes", mime_type="text/plain")
    async def profile_notes() -> str:
        """The person's profile notes: what Ash keeps in mind in every conversation with them."""
        return await run(access.profile_notes)

    @server.resource("ash://sessions/recent", name="recent-sessions", mime_type="application/json")
    async def recent_sessions() -> str:
        """Summaries of the person's most recent conversations with Ash."""
        return _json(await run(access.recent_summaries))
