"""`POST /telegram/webhook`: check the secret, store the update, answer 200 at once.

Status codes (SPEC): no secret configured 403, secret missing or wrong 401, body over
server.max_body_bytes 413, not JSON or no integer update_id 400, else 200. Nothing is stored
unless the answer is 200; a database that cannot take the row answers 503 (Telegram retries).
"""

from __future__ import annotations

import hmac
import logging

import anyio.to_thread
from litestar import Request, post
from litestar.background_tasks import BackgroundTask
from litestar.response import Response

from lib.runtime import get_runtime
from lib.webhook_intake import Rejected, read_limited, store_update, wake_processor

log = logging.getLogger("ash.webhook")

SECRET_HEADER = "x-telegram-bot-api-secret-token"  # noqa: S105 (a header name)


def _refuse(status: int, detail: str) -> Response:
    return Response({"ok": False, "detail": detail}, status_code=status)


@post("/telegram/webhook", status_code=200, include_in_schema=True)
async def telegram_webhook(request: Request) -> Response:
    """Receive one Telegram update (Telegram sends them one request at a time)."""
    runtime = get_runtime(request.app)
    expected = runtime.settings.secrets.telegram_webhook_secret
    if not expected:
        log.warning("webhook refused (403): TELEGRAM_WEBHOOK_SECRET is not set, so no update can be trusted")
        return _refuse(403, "webhook disabled: TELEGRAM_WEBHOOK_SECRET is not set")
    given = request.headers.get(SECRET_HEADER, "")
    if not hmac.compare_digest(given.encode(), expected.encode()):
        return _refuse(401, "missing or wrong secret token")
    try:
        body = await read_limited(request, runtime.settings.config.server.max_body_bytes)
        # One short apsw write, off the event loop: a locked database waits out its busy
        # timeout in a worker thread instead of freezing every other request.
        await anyio.to_thread.run_sync(store_update, runtime, body)
    except Rejected as exc:
        return _refuse(exc.status, exc.detail)
    return Response({"ok": True}, status_code=200, background=BackgroundTask(wake_processor, runtime))
