"""Tools of outside MCP servers (`[mcp.servers.NAME]`), offered to the model as `NAME__tool`.

A server is reached over stdio (`command`, `args`, `env`) or Streamable HTTP (`url`,
`headers`). `${VAR}` inside `env` and `headers` values is read from Ash's environment when the
server is started, so secrets stay out of the config file. A stdio server runs outside the
sandbox with this process's file access, but its environment is only its own `env` plus `PATH`
and `HOME`: none of Ash's secrets.

The model APIs accept tool names of `^[a-zA-Z0-9_-]{1,64}$` only: a tool whose `NAME__tool` would
break that (a dot, a slash, too long once prefixed) is offered under an alias (`api_names`) and
called on its server by its own name.

Each server's tools are listed once per process (a server that fails to start is logged and
skipped, and tried again after RETRY_AFTER seconds); every call opens its own connection, so a
crashed server costs one call, and nothing is held between turns. A call that outlasts
`call_timeout` is abandoned (its connection is torn down in the background) so the turn goes
on; output beyond `output_limit` characters is cut. Whatever a server says is data, never
instructions: the turn frames every tool output that way, and the `__` in the name marks the
tool as outside.

The MCP SDK loads only when a server is configured and first used.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from lib.config import McpServerConfig, Settings
from lib.tools.base import ToolContext, ToolResult

log = logging.getLogger("ash.tools.mcp")

SEPARATOR = "__"
# What the model APIs accept as a tool name (Anthropic and OpenAI alike).
TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
REFUSED_CHARACTERS = re.compile(r"[^A-Za-z0-9_-]+")
VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# Variables a stdio server inherits from Ash: nothing else, and never a secret.
INHERITED = ("PATH", "HOME")
RETRY_AFTER = 60.0
DESCRIPTION_LIMIT = 1024


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
            room = 64 - len(prefix) - 1 - digits  # server names are at most 32 characters (lib/config.py)
            alias = f"{prefix}{readable[:room].rstrip('_')}_{digest[:digits]}"
            if alias not in taken:
                names[tool] = alias
                taken.add(alias)
                break
        else:
            log.warning("MCP tool %r of server %s has no free name the model APIs accept; skipped", tool, server)
    return names


def resolve(value: str, environ: Mapping[str, str]) -> str:
    """`value` with every `${NAME}` replaced from `environ`; ValueError names a missing variable."""

    def one(match: re.Match) -> str:
        name = match.group(1)
        if name not in environ:
            raise ValueError(f"environment variable {name} is not set")
        return environ[name]

    return VARIABLE.sub(one, value)


def server_environment(spec: McpServerConfig, environ: Mapping[str, str]) -> dict[str, str]:
    """A stdio server's whole environment: PATH and HOME from Ash's, then its own `env`."""
    inherited = {name: environ[name] for name in INHERITED if name in environ}
    return {**inherited, **{key: resolve(value, environ) for key, value in spec.env.items()}}


def _stdio_parameters(spec: McpServerConfig, environ: Mapping[str, str]):
    from mcp.client.stdio import DEFAULT_INHERITED_ENV_VARS, StdioServerParameters

    env = server_environment(spec, environ)
    # The SDK adds a few variables of ours (USER, SHELL, ...) to every server's environment;
    # `env -u` takes them out again, so the server sees exactly `env`.
    unset = [arg for name in DEFAULT_INHERITED_ENV_VARS if name not in env for arg in ("-u", name)]
    return StdioServerParameters(command="env", args=[*unset, "--", spec.command, *spec.args], env=env)


@contextlib.asynccontextmanager
async def _http_transport(spec: McpServerConfig, environ: Mapping[str, str], timeout: float) -> AsyncIterator[Any]:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    headers = {key: resolve(value, environ) for key, value in spec.headers.items()}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
        streamable_http_client(spec.url, http_client=http) as streams,
    ):
        yield streams


@contextlib.asynccontextmanager
async def connect(spec: McpServerConfig, environ: Mapping[str, str] | None = None) -> AsyncIterator[Any]:
    """An MCP client session with one server (the SDK's `Client`)."""
    from mcp import Client

    environ = os.environ if environ is None else environ
    if spec.command is not None:
        server: Any = _stdio_parameters(spec, environ)
    else:
        server = _http_transport(spec, environ, spec.call_timeout)
    async with Client(server, read_timeout_seconds=spec.call_timeout) as client:
        yield client


async def list_server(name: str, spec: McpServerConfig) -> Listed:
    """Ask one server for its tools within `start_timeout`; a failure is logged and returned."""
    try:
        async with asyncio.timeout(spec.start_timeout):
            async with connect(spec) as client:
                listed = await client.list_tools()
        return Listed(name, tuple(listed.tools), at=time.monotonic())
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        log.warning("MCP server %s could not be started and is skipped: %s", name, error)
        return Listed(name, error=error, at=time.monotonic())


async def discover(settings: Settings) -> list[Listed]:
    """List every configured server's tools (concurrently) and remember the answers."""
    servers = settings.config.mcp.servers
    try:
        found = await asyncio.gather(*(list_server(name, spec) for name, spec in servers.items()))
        with _LOCK:
            for listed in found:
                _LISTED[_key(listed.server, servers[listed.server])] = listed
        return list(found)
    finally:
        _IN_FLIGHT.discard(id(settings))


_LISTED: dict[str, Listed] = {}  # by server name and configuration: a cache of answers, not decisions
_LOCK = threading.Lock()
_IN_FLIGHT: set[int] = set()  # discoveries running on a thread of their own
_ABANDONED: set[asyncio.Task] = set()  # timed-out calls whose connections are still closing
WARM_UP_DELAY = 1.0


def _in_background(settings: Settings, delay: float = 0.0) -> None:
    """Discover on a daemon thread with its own event loop: the SDK's import and the servers'
    start-up never hold the server's loop."""
    _IN_FLIGHT.add(id(settings))

    def run() -> None:
        time.sleep(delay)
        asyncio.run(discover(settings))

    threading.Thread(target=run, name="mcp-discovery", daemon=True).start()


def warm_up(settings: Settings) -> None:
    """At server start: list the servers' tools a moment after start-up, off the first answers."""
    if settings.config.mcp.servers:
        _in_background(settings, WARM_UP_DELAY)


def _key(name: str, spec: McpServerConfig) -> str:
    import msgspec

    return name + ":" + msgspec.json.encode(spec).decode()


def _stale(listed: Listed | None) -> bool:
    return listed is None or (listed.error is not None and time.monotonic() - listed.at > RETRY_AFTER)


def _discover_now(settings: Settings) -> None:
    """Discover from synchronous code (the first turn of `ash chat`, tests): on a thread of its own,
    since the caller may be inside an event loop."""
    thread = threading.Thread(target=lambda: asyncio.run(discover(settings)), name="mcp-discovery")
    thread.start()
    thread.join()


def mcp_tools(settings: Settings) -> list[McpTool]:
    """The tools of every configured server that answered, named `NAME__tool`."""
    servers = settings.config.mcp.servers
    if not servers:
        return []
    answers = [_LISTED.get(_key(name, spec)) for name, spec in servers.items()]
    if id(settings) not in _IN_FLIGHT:
        if any(a is None for a in answers):
            _discover_now(settings)  # first use in this process (`ash chat`): wait for the answer
        elif any(_stale(a) for a in answers):
            _in_background(settings)  # a failed server is tried again; this turn goes on without it
    tools: list[McpTool] = []
    for name, spec in servers.items():
        listed = _LISTED.get(_key(name, spec))
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

    async def _call(self, args: dict) -> Any:
        async with connect(self.spec) as client:
            return await client.call_tool(self.remote_name, args)

    async def execute(self, args: dict, context: ToolContext) -> ToolResult:
        """Call the tool on its server, within `call_timeout` and `output_limit`."""
        untrusted = {"untrusted": True, "mcp_server": self.server}
        task = asyncio.create_task(self._call(dict(args or {})))
        done, _ = await asyncio.wait({task}, timeout=self.spec.call_timeout)
        if not done:
            # Not awaited: closing a hung server's connection can take seconds the turn need not wait.
            task.cancel()
            _ABANDONED.add(task)
            task.add_done_callback(_ABANDONED.discard)
            log.warning("MCP tool %s timed out after %.0f s", self.name, self.spec.call_timeout)
            return ToolResult(
                f"The MCP server {self.server} did not answer within {self.spec.call_timeout:g} s.",
                is_error=True,
                metadata=untrusted,
            )
        try:
            result = task.result()
        except Exception as exc:
            log.warning("MCP tool %s failed: %s: %s", self.name, type(exc).__name__, exc)
            return ToolResult(
                f"The MCP server {self.server} failed: {type(exc).__name__}", is_error=True, metadata=untrusted
            )
        return ToolResult(_capped(render(result), self.spec.output_limit), is_error=result.is_error, metadata=untrusted)
