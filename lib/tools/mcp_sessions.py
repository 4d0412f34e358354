"""One MCP session per configured server (`[mcp.servers.NAME]`), kept for the life of the process.

A stdio server used to be started for every call: 2 to 4 s each here, and a server that keeps
state between calls (a counter, an open file, a login) lost it every time. Now each server is
started once, on first use, and its session is shared by every turn:

- The sessions live on a thread of their own with its own event loop (`Hub`): the SDK's import
  and a server's start never run on a caller's loop, and a call from any loop (the web server's,
  `ash chat`'s, a test's) reaches the same session.
- Each session is owned by one task, which opens the SDK's client and holds it until told to
  stop: the SDK's transports must be entered and left by the same task. A lock makes one caller
  (re)start a session while the others wait for it.
- Before a call, a stdio session is pinged (a round trip through its pipes, about a millisecond):
  a server that died since the last call is started again first, with a log line, and the call
  goes to the new one. A call whose connection breaks while it runs is not repeated (the server
  may have acted on it); the session is started again for the next call. A Streamable HTTP
  session is not pinged (that would cost a network round trip per call): after a failed call it
  is opened again for the next one.
- `close_all()` stops every session (a stdio server gets its stdin closed, then SIGTERM and
  SIGKILL from the SDK if it lingers) and the thread: the web server's shutdown and `ash chat`
  call it, and it runs at interpreter exit in case a command did not.

`${VAR}` inside `env` and `headers` values is read from Ash's environment when the server is
started, so secrets stay out of the config file. A stdio server runs outside the sandbox with
this process's file access, but its environment is only its own `env` plus `PATH` and `HOME`.
The MCP SDK loads only when a server is first used.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import logging
import os
import re
import threading
from collections.abc import AsyncIterator, Coroutine, Mapping
from typing import Any

import msgspec

from lib.config import McpServerConfig

log = logging.getLogger("ash.tools.mcp")

VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# Variables a stdio server inherits from Ash: nothing else, and never a secret.
INHERITED = ("PATH", "HOME")
# Seconds a live stdio server has to answer the ping before a call.
PING_TIMEOUT = 5.0
# Seconds a session has to close (the SDK gives a stdio server 2 s after its stdin closes, then
# SIGTERM and SIGKILL).
CLOSE_TIMEOUT = 10.0
CONNECTION_CLOSED = -32000  # mcp_types.CONNECTION_CLOSED, without importing the SDK here


class StartFailed(Exception):
    """The server could not be started (or reached) within `start_timeout`."""


class CallTimedOut(Exception):
    """The server did not answer a call within `call_timeout`."""


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
    # A backstop only: starting is bounded by start_timeout and each call by call_timeout (Session),
    # and the handshake of a server that is slow to import must not fall under call_timeout.
    patience = max(spec.start_timeout, spec.call_timeout)
    if spec.command is not None:
        # The initialize handshake: a stdio session is one long connection, every server since
        # 2024-11-05 speaks it, and it keeps `ping` (2026-07-28 dropped it) for the check before
        # each call.
        server: Any = _stdio_parameters(spec, environ)
        mode = "legacy"
    else:
        server = _http_transport(spec, environ, patience)
        mode = "auto"
    async with Client(server, read_timeout_seconds=patience, mode=mode) as client:
        yield client


def describe(exc: BaseException) -> str:
    """An exception as a short line for the log and the model (the first of a group's)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _connection_lost(exc: BaseException) -> bool:
    """True when a call failed because the connection did, not because the server said no."""
    error = getattr(exc, "error", None)
    if error is not None and hasattr(error, "code"):
        return error.code == CONNECTION_CLOSED
    return True


class Session:
    """One server's session, owned by one task on the hub's loop; (re)started by whoever needs it."""

    def __init__(self, name: str, spec: McpServerConfig):
        self.name = name
        self.spec = spec
        self.client: Any = None
        self.starts = 0
        self._owner: asyncio.Task | None = None
        self._stop: asyncio.Event | None = None
        self._broken = False
        self._calls = 0  # calls in flight on this session
        self._lock = asyncio.Lock()

    async def ready(self) -> Any:
        """The live client: started now if there is none, started again if the server died."""
        async with self._lock:
            # A session with calls in flight is in use: a server busy with one (a tool that holds
            # its loop) may be slow to answer a ping, and must not be restarted under that call.
            if self.client is not None and not self._broken and (self._calls or await self._alive()):
                return self.client
            if self.client is not None or self._owner is not None:
                log.warning("MCP server %s stopped answering; starting it again", self.name)
                await self._close()
            await self._start()
            return self.client

    async def call(self, tool: str, arguments: dict) -> Any:
        """Call one tool (its name as the server gave it) within `call_timeout`."""
        client = await self.ready()
        self._calls += 1
        try:
            async with asyncio.timeout(self.spec.call_timeout):
                return await client.call_tool(tool, arguments)
        except TimeoutError:
            raise CallTimedOut(self.spec.call_timeout) from None
        except Exception as exc:
            if _connection_lost(exc) and client is self.client:
                self._broken = True  # not repeated here: the server may have acted on it
            raise
        finally:
            self._calls -= 1

    async def list_tools(self) -> list[Any]:
        """The server's tools, every page of them."""
        client = await self.ready()
        tools: list[Any] = []
        cursor = None
        while True:
            listed = await client.list_tools(cursor=cursor)
            tools.extend(listed.tools)
            cursor = getattr(listed, "next_cursor", None)
            if not cursor:
                return tools

    async def close(self) -> None:
        """Stop the session (and a stdio server's process)."""
        async with self._lock:
            await self._close()

    async def _alive(self) -> bool:
        if self.spec.command is None:
            return True  # Streamable HTTP: a failed call marks the session broken instead
        try:
            async with asyncio.timeout(PING_TIMEOUT):
                await self.client.session.send_ping()  # Client.send_ping warns of 2026-07-28
            return True
        except Exception:
            return False

    async def _start(self) -> None:
        loop = asyncio.get_running_loop()
        opened: asyncio.Future = loop.create_future()
        stop = asyncio.Event()

        async def own() -> None:
            try:
                async with connect(self.spec) as client:
                    opened.set_result(client)
                    await stop.wait()
            except BaseException as exc:
                if not opened.done():
                    opened.set_exception(exc if isinstance(exc, Exception) else StartFailed(describe(exc)))
                elif not stop.is_set() and not isinstance(exc, asyncio.CancelledError):
                    log.warning("MCP server %s: its connection ended: %s", self.name, describe(exc))
                if isinstance(exc, asyncio.CancelledError):
                    raise

        owner = asyncio.create_task(own(), name=f"mcp-session-{self.name}")
        owner.add_done_callback(lambda task: self._owner_ended(task))
        self._owner, self._stop = owner, stop
        try:
            async with asyncio.timeout(self.spec.start_timeout):
                client = await asyncio.shield(opened)
        except TimeoutError:
            await self._close()
            raise StartFailed(f"no answer within {self.spec.start_timeout:g} s") from None
        except Exception as exc:
            await self._close()
            raise StartFailed(describe(exc)) from exc
        except BaseException:  # cancelled while starting: the half-started server goes too
            await self._close()
            raise
        self.client, self._broken = client, False
        self.starts += 1
        log.info("MCP server %s started%s", self.name, " again" if self.starts > 1 else "")

    def _owner_ended(self, task: asyncio.Task) -> None:
        if task is self._owner:
            self._broken = True  # the next call starts it again

    async def _close(self) -> None:
        owner, stop = self._owner, self._stop
        self._owner = self._stop = None
        self.client = None
        if owner is None:
            return
        stop.set()
        # How the old connection ended is logged by its owner; here it only has to be over.
        done, _ = await asyncio.wait({owner}, timeout=CLOSE_TIMEOUT)
        if not done:
            owner.cancel()
            await asyncio.wait({owner}, timeout=CLOSE_TIMEOUT)


def session_key(name: str, spec: McpServerConfig) -> str:
    """A server's identity: its name and its whole configuration (a changed one is a new server)."""
    return name + ":" + msgspec.json.encode(spec).decode()


class Hub:
    """The sessions of this process, on a thread with its own event loop (started on first use)."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()

    def submit(self, work: Coroutine) -> concurrent.futures.Future:
        """Run `work` on the hub's loop; its future, for any thread or loop to wait on."""
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="mcp-sessions", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return asyncio.run_coroutine_threadsafe(work, self._loop)

    def session(self, name: str, spec: McpServerConfig) -> Session:
        """The session of one configured server (on the hub's loop only)."""
        key = session_key(name, spec)
        if key not in self._sessions:
            self._sessions[key] = Session(name, spec)
        return self._sessions[key]

    async def keep_only(self, keys: set[str]) -> None:
        """Close the sessions of servers no longer configured (after a reload)."""
        for key in [key for key in self._sessions if key not in keys]:
            await self._sessions.pop(key).close()

    async def _close_sessions(self) -> None:
        sessions, self._sessions = list(self._sessions.values()), {}
        await asyncio.gather(*(session.close() for session in sessions), return_exceptions=True)

    def close_all(self, timeout: float = CLOSE_TIMEOUT + 5) -> None:
        """Stop every session and the thread; the next use starts afresh."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self._close_sessions(), loop).result(timeout)
        except Exception as exc:
            log.warning("MCP sessions did not all close: %s", describe(exc))
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        if not thread.is_alive():
            loop.close()


HUB = Hub()  # a cache of connections, like the sandbox's warm containers: clients, not decisions
atexit.register(HUB.close_all)
