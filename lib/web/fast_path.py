"""What the server runs: one hot route straight to its raw ASGI handler, the rest through Litestar.

Litestar's router and exception middleware cost about as much per request as the webhook's own
work (secret check, decode, commit), and the webhook is the one route that takes Telegram's full
rate, so the server answers it before Litestar's machinery. Lifespan and every other route
(health, admin) go through Litestar unchanged. app.py hands in the path and the handler, so
this module knows no handler of its own.
"""

from __future__ import annotations

import contextlib
import logging

from litestar import Litestar
from litestar.types import ASGIApp, Receive, Scope, Send

from lib.web.errors import status_for

log = logging.getLogger("ash.webhook")


def with_fast_path(app: Litestar, path: str, handler: ASGIApp) -> ASGIApp:
    """An ASGI app serving `path` with `handler` directly and everything else through `app`."""

    async def serve(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != path:
            await app(scope, receive, send)
            return
        scope["app"] = app
        try:
            await handler(scope, receive, send)
        except Exception as exc:
            # What Litestar's exception handlers would do with an error the handler let through.
            status = status_for(exc)
            log.error("%s: unexpected error, answering %d", path, status, exc_info=exc)
            body = b'{"ok":false,"detail":"internal error"}'
            with contextlib.suppress(Exception):  # the response may have started already
                await send(
                    {
                        "type": "http.response.start",
                        "status": status,
                        "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))],
                    }
                )
                await send({"type": "http.response.body", "body": body})

    return serve
