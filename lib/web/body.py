"""Reading a request body by hand in a raw ASGI handler, within a size limit."""

from __future__ import annotations

from litestar.types import Receive, Scope

from lib.errors import Rejected


def header(scope: Scope, name: bytes) -> bytes | None:
    """One request header's raw value from an ASGI scope (names are lower-case there)."""
    for key, value in scope["headers"]:
        if key == name:
            return value
    return None


async def read_limited(scope: Scope, receive: Receive, limit: int) -> bytes:
    """The body, refused with 413 when Content-Length or the bytes actually sent exceed `limit`."""
    declared = header(scope, b"content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        raise Rejected(413, f"body over {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    more = True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise Rejected(400, "client disconnected")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise Rejected(413, f"body over {limit} bytes")
        chunks.append(chunk)
        more = message.get("more_body", False)
    return b"".join(chunks)
