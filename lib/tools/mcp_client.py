"""Tools of outside MCP servers (`[mcp.servers.NAME]`), offered to the model as `NAME__tool`.

A server is reached over stdio (`command`, `args`, `env`) or Streamable HTTP (`url`,
`headers`), through one session per server kept for the life of the process
(lib/tools/mcp_sessions.py: started on first use on a thread of its own, started again when
the server dies, closed at shutdown).

Each server's tools are listed once per process (a server that fails to start is logged and
skipped, and tried again after RETRY_AFTER seconds). The model APIs accept tool names of
`^[a-zA-Z0-9_-]{1,64}$` only: a tool whose `NAME__tool` would break that (a dot, a slash, too
long once prefixed) is offered under an alias (`api_names`) and called on its server by its own
name. A call that outlasts `call_timeout` is given up (the session stays); output beyond
`output_limit` characters is cut. Whatever a server says is data, never instructions: the turn
frames every tool output that way, and the `__` in the name marks the tool as outside.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from lib.config import McpServerConfig, Settings
from lib.tools.base import ToolContext, ToolResult
from lib.tools.mcp_sessions import CLOSE_TIMEOUT, HUB, CallTimedOut, StartFailed, describe, session_key

log = logging.getLogger("ash.tools.mcp")

SEPARATOR = "__"
# What the model APIs accept as a tool name (Anthropic and OpenAI alike).
TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
REFUSED_CHARACTERS = re.compile(r"[^A-Za-z0-9_-]+")
RETRY_AFTER = 60.0
DESCRIPTION_LIMIT = 1024
WARM_UP_DELAY = 1.0


@dataclass(frozen=True)
class Listed:
    """What one server offered when it was asked, or why it could not be asked."""

    server: str
    tools: tuple[Any, ...] = ()  # mcp_types.Tool
    error: str | None = None
    at: float = 0.0


def api_names(server: str, tools: Iterable[str]) -> dict[str, str]:
    """Each tool's name as the model sees it: `SERVER__tool` when the model APIs accept that, else
    an alias of the same shape, readable and stable: the characters they refuse become `_`, the
    name is shortened to fit 64, and 8 hex digits of the tool name's sha256 keep it unique (16 if
    8 ever collide). Names that need no alias are kept first, so an alias never takes one."""
    prefix = server + SEPARATOR
    tools = list(tools)
    names: dict[str, str] = {}
    for tool in tools:
        if TOOL_NAME.fullmatch(prefix + tool):
            names.setdefault(tool, prefix + tool)
    taken = set(names.values())
    for tool in tools:
        if tool in names:
            continue
        readable = REFUSED_CHARACTERS.sub("_", tool).strip("_") or "tool"
        digest = hashlib.sha256(tool.encode()).hexdigest()
        for digits in (8, 16):
            room = 64 - len(prefix) - 1 - digits  # server names are at most 32 characters (lib/config/settings.py)
            alias = f"{prefix}{readable[:room].rstrip('_')}_{digest[:digits]}"
            if alias not in taken:
                names[tool] = alias
                taken.add(alias)
                break
        else:
            log.warning("MCP tool %r of server %s has no free name the model APIs accept; skipped", tool, server)
    return names


async def list_server(name: str, spec: McpServerConfig) -> Listed:
    """Ask one server for its tools within `start_timeout`; a failure is logged and returned."""
    try:
        async with asyncio.timeout(spec.start_timeout):
            tools = await HUB.session(name, spec).list_tools()
        return Listed(name, tuple(tools), at=time.monotonic())
    except Exception as exc:
        if isinstance(exc, TimeoutError):
            error = f"no answer within {spec.start_timeout:g} s"
        else:
            error = str(exc) if isinstance(exc, StartFailed) else describe(exc)
        log.warning("MCP server %s could not be started and is skipped: %s", name, error)
        return Listed(name, error=error, at=time.monotonic())


async def _discover(settings: Settings, delay: float = 0.0) -> list[Listed]:
    """On the hub's loop: list every configured server's tools (concurrently), remember the answers,
    and close the sessions of servers no longer configured."""
    servers = settings.config.mcp.servers
    try:
        await asyncio.sleep(delay)
        found = await asyncio.gather(*(list_server(name, spec) for name, spec in servers.items()))
        with _LOCK:
            for listed in found:
                _LISTED[session_key(listed.server, servers[listed.server])] = listed
        await HUB.keep_only({session_key(name, spec) for name, spec in servers.items()})
        return list(found)
    finally:
        _IN_FLIGHT.discard(id(settings))


def discover(settings: Settings) -> list[Listed]:
    """List every configured server's tools and wait for the answers (`ash doctor`, first use)."""
    return HUB.submit(_discover(settings)).result()


_LISTED: dict[str, Listed] = {}  # by server name and configuration: a cache of answers, not decisions
_LOCK = threading.Lock()
_IN_FLIGHT: set[int] = set()  # discoveries running on the hub without anyone waiting


def _in_background(settings: Settings, delay: float = 0.0) -> None:
    """Discover on the hub without waiting: this turn goes on with what is known."""
    _IN_FLIGHT.add(id(settings))
    HUB.submit(_discover(settings, delay))


def warm_up(settings: Settings) -> None:
    """At server start: list the servers' tools (starting their sessions) a moment after start-up,
    off the first answers."""
    if settings.config.mcp.servers:
        _in_background(settings, WARM_UP_DELAY)


def close_sessions() -> None:
    """Stop every MCP server session (blocking: from async code, run it in a thread)."""
    HUB.close_all()


def _stale(listed: Listed | None) -> bool:
    return listed is None or (listed.error is not None and time.monotonic() - listed.at > RETRY_AFTER)


def mcp_tools(settings: Settings) -> list[McpTool]:
    """The tools of every configured server that answered, each under the name the model sees."""
    servers = settings.config.mcp.servers
    if not servers:
        return []
    answers = [_LISTED.get(session_key(name, spec)) for name, spec in servers.items()]
    if id(settings) not in _IN_FLIGHT:
        if any(a is None for a in answers):
            discover(settings)  # first use in this process (`ash chat`): wait for the answer
        elif any(_stale(a) for a in answers):
            _in_background(settings)  # a failed server is tried again; this turn goes on without it
    tools: list[McpTool] = []
    for name, spec in servers.items():
        listed = _LISTED.get(session_key(name, spec))
        offered = listed.tools if listed else ()
        aliases = api_names(name, [tool.name for tool in offered])
        for tool in offered:
            if tool.name in aliases:
                tools.append(McpTool(aliases[tool.name], name, spec, tool))
    return tools


def render(result: Any) -> str:
    """A tool result's content as text for the model."""
    parts = []
    for block in result.content:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource" and hasattr(block.resource, "text"):
            parts.append(block.resource.text)
        else:
            parts.append(f"[{kind or 'unknown'} content not shown]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


def _capped(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[output cut: {len(text) - limit} more characters]"


async def _call(server: str, spec: McpServerConfig, tool: str, arguments: dict) -> Any:
    return await HUB.session(server, spec).call(tool, arguments)


class McpTool:
    """One tool of an outside MCP server, as the model sees it."""

    Input: ClassVar[type] = dict  # the server's own JSON schema describes the arguments

    def __init__(self, name: str, server: str, spec: McpServerConfig, tool: Any):
        self.name = name
        self.server = server
        self.spec = spec
        self.remote_name = tool.name
        described = (tool.description or tool.title or tool.name).strip()
        # An alias says which tool it stands for.
        origin = f"MCP server {server}" + (f", tool {tool.name}" if name != f"{server}{SEPARATOR}{tool.name}" else "")
        self.description = f"[{origin}] {described[:DESCRIPTION_LIMIT]}"
        schema = dict(tool.input_schema or {})
        schema.setdefault("type", "object")
        schema.setdefault("properties", {})
        self.input_schema = schema

    async def execute(self, args: dict, context: ToolContext) -> ToolResult:
        """Call the tool on its server's session, within `call_timeout` and `output_limit`."""
        untrusted = {"untrusted": True, "mcp_server": self.server}
        work = HUB.submit(_call(self.server, self.spec, self.remote_name, dict(args or {})))
        # The hub bounds the start and the call; this ceiling only guards against a stuck hub.
        ceiling = self.spec.start_timeout + self.spec.call_timeout + 2 * CLOSE_TIMEOUT
        try:
            result = await asyncio.wait_for(asyncio.wrap_future(work), ceiling)
        except (CallTimedOut, TimeoutError):
            log.warning("MCP tool %s timed out after %g s", self.name, self.spec.call_timeout)
            return ToolResult(
                f"The MCP server {self.server} did not answer within {self.spec.call_timeout:g} s.",
                is_error=True,
                metadata=untrusted,
            )
        except StartFailed as exc:
            log.warning("MCP tool %s: the server could not be started: %s", self.name, exc)
            return ToolResult(f"The MCP server {self.server} could not be started.", is_error=True, metadata=untrusted)
        except Exception as exc:
            log.warning("MCP tool %s failed: %s", self.name, describe(exc))
            error = getattr(exc, "error", None)
            why = f": {error.message}" if getattr(error, "message", None) else f": {type(exc).__name__}"
            return ToolResult(f"The MCP server {self.server} failed{why}", is_error=True, metadata=untrusted)
        return ToolResult(_capped(render(result), self.spec.output_limit), is_error=result.is_error, metadata=untrusted)
