"""Reading a request body by hand in a raw ASGI handler, within a size limit."""

from __future__ import annotations

import asyncio

from litestar.types import Receive, Scope

from lib.errors import Rejected


class ClientGone(Rejected):
    """The client disconnected before its body was all sent."""


def header(scope: Scope, name: bytes) -> bytes | None:
    """One request header's raw value from an ASGI scope (names are lower-case there)."""
    for key, value in scope["headers"]:
        if key == name:
            return value
    return None


async def read_limited(scope: Scope, receive: Receive, limit: int, timeout: float) -> bytes:
    """The body, refused with 413 when Content-Length or the bytes actually sent exceed `limit`,
    and with 408 when it has not all arrived within `timeout` seconds."""
    try:
        async with asyncio.timeout(timeout):
            return await _read(scope, receive, limit)
    except TimeoutError:
        raise Rejected(408, f"the body did not arrive within {timeout:g} s") from None


async def _read(scope: Scope, receive: Receive, limit: int) -> bytes:
    declared = header(scope, b"content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        raise Rejected(413, f"body over {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    more = True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone(400, "client disconnected")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise Rejected(413, f"body over {limit} bytes")
        chunks.append(chunk)
        more = message.get("more_body", False)
    return b"".join(chunks)
