"""`POST /telegram/webhook`: check the secret, store the update, answer 200 at once.

Status codes (SPEC): no secret configured 403, secret missing or wrong 401, body over
server.max_body_bytes 413, not JSON or no integer update_id 400, else 200. Nothing is stored
unless the answer is 200; a database that cannot take the row answers 503 (Telegram retries).
"""

from __future__ import annotations

import hmac
import logging

import apsw
from litestar import Request, post
from litestar.enums import MediaType
from litestar.response import Response

from lib.errors import AshError
from lib.runtime import get_runtime
from lib.webhook_intake import Rejected, accept, read_limited, wake_processor

log = logging.getLogger("ash.webhook")

OK_BODY = b'{"ok":true}'
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
        # Committed before the 200, off the event loop (group commit: lib/inbox_writer.py).
        await accept(runtime, body)
    except Rejected as exc:
        return _refuse(exc.status, exc.detail)
    except (AshError, apsw.Error) as exc:
        # Not stored, whatever the reason: 503 so Telegram delivers it again later.
        log.error("update not stored, answering 503: %s", exc)
        return _refuse(503, "update not stored; retry later")
    # Stored: tell the processor (it only sets an event; the turn runs after this response).
    wake_processor(runtime)
    return Response(OK_BODY, status_code=200, media_type=MediaType.JSON)
