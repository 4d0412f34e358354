"""What the server runs: Telegram's webhook straight to its handler, every other request to Litestar.

Litestar's router and exception middleware cost about as much per request as the webhook's own
work (secret check, decode, commit), and the webhook is the one route that takes Telegram's full
rate, so the server answers it before Litestar's machinery. Lifespan and every other route
(health, admin) go through Litestar unchanged; the webhook is still a Litestar route too, which
the test client and a trailing-slash path use.
"""

from __future__ import annotations

import contextlib
import logging

from litestar import Litestar
from litestar.types import ASGIApp, Receive, Scope, Send

from handlers.telegram_webhook import WEBHOOK_PATH, answer, handle_webhook

log = logging.getLogger("ash.webhook")

INTERNAL_ERROR = b'{"ok":false,"detail":"internal error"}'


def with_webhook_fast_path(app: Litestar) -> ASGIApp:
    """An ASGI app serving `POST /telegram/webhook` directly and the rest through `app`."""

    async def serve(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != WEBHOOK_PATH:
            await app(scope, receive, send)
            return
        scope["app"] = app
        try:
            await handle_webhook(scope, receive, send)
        except Exception:
            # What Litestar's exception handler would do for a bug: log it, answer 500 if still possible.
            log.exception("webhook: unexpected error")
            with contextlib.suppress(Exception):  # the response may have started already
                await answer(send, 500, INTERNAL_ERROR)

    return serve
