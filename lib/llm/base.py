"""The provider interface every model backend implements."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Protocol

from lib.errors import LLMError
from lib.llm.types import Message, Request, Response, StreamEvent, TextBlock


class Provider(Protocol):
    """A model backend. Errors are raised as lib.errors.LLMError with `retryable` set."""

    name: str

    async def complete(self, request: Request) -> Response:
        """One non-streaming call."""
        ...

    def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        """Text deltas as they arrive, then one Completed event with the whole response."""
        ...

    async def aclose(self) -> None:
        """Release the client's connections."""
        ...

    def warm(self) -> None:
        """Load what the first call imports (on the server's warm-up thread, lib/runtime.py)."""
        ...


# What the SDKs import on their first request rather than at import: anyio's asyncio backend
# (62 ms here), the tracing propagators the Anthropic SDK looks for (16 ms). Warmed with the
# client so that no import is left for the event loop.
FIRST_REQUEST_IMPORTS = (
    "anyio._backends._asyncio",
    "anyio.streams.memory",
    "anyio.streams.stapled",
    "concurrent.futures.thread",
    "queue",
    "opentelemetry.propagate",
    "opentelemetry.trace.propagation.tracecontext",
    "opentelemetry.baggage.propagation",
)


def import_ahead(names: tuple[str, ...]) -> None:
    """Import each module now if it is installed (an SDK imports those that are, on first use)."""
    for name in names:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


class Embedder(Protocol):
    """A provider that can also embed text (OpenAI and compatible servers)."""

    async def embed(self, texts: list[str], *, model: str, dimensions: int | None = None) -> list[list[float]]:
        """One vector per text, in order."""
        ...


def parse_retry_after(headers) -> float | None:
    """Seconds to wait from `retry-after-ms` or `retry-after` (seconds or an HTTP date)."""
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def map_sdk_error(exc: BaseException, provider: str, sdk: Any, from_status: Callable[[Any], LLMError]) -> LLMError:
    """An exception of the `sdk` module as an LLMError; `from_status` reads the provider's own error bodies.

    Both official SDKs name their status, timeout and connection errors alike; everything but a
    status error is the network's doing, so another try can help.
    """
    if isinstance(exc, sdk.APIStatusError):
        return from_status(exc)
    if isinstance(exc, sdk.APITimeoutError | asyncio.TimeoutError):
        return LLMError(f"{provider}: request timed out", provider=provider, retryable=True)
    if isinstance(exc, sdk.APIConnectionError):
        return LLMError(f"{provider}: connection failed: {exc}", provider=provider, retryable=True)
    # A stream cut off by the network, an `error` object inside a stream, or an SDK error without a status.
    return LLMError(f"{provider}: {type(exc).__name__}: {exc}", provider=provider, retryable=True)


def response_retry_after(exc: Any) -> float | None:
    """The wait a status error's response advertises, if it has a response."""
    return parse_retry_after(exc.response.headers) if exc.response is not None else None


def parse_tool_input(raw: str) -> dict[str, Any]:
    """The assembled JSON of a tool call; invalid JSON reaches the tool as a visible error."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return {"_invalid_json": raw}
    return value if isinstance(value, dict) else {"_invalid_json": raw}


def rehearse(make: Callable[[Any], Provider], sse: bytes) -> None:
    """Stream one canned answer through a provider built by `make(http_client)` whose HTTP client
    never leaves the process. An SDK builds some of what a streamed answer needs at its first one
    (the pydantic schema of the stream's event union: 80 to 110 ms, seen in the soak on the event
    loop at a server's first turn); here that happens on the warm-up thread instead. Blocks: it
    runs an event loop of its own."""
    import httpx2

    def answer(request: Any) -> Any:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=sse)

    async def run() -> None:
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(answer)) as http:
            provider = make(http)
            request = Request(system="", messages=(Message("user", (TextBlock("hi"),)),), model="warm-up", max_tokens=8)
            async for _ in provider.stream(request):
                pass

    asyncio.run(run())
