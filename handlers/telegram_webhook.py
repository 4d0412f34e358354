"""`POST /telegram/webhook`: check the secret, store the update, answer 200 at once.

Status codes (SPEC): no secret configured 403, secret missing or wrong 401, body over
server.max_body_bytes 413, not JSON or no integer update_id 400, else 200. Nothing is stored
unless the answer is 200; a database that cannot take the row answers 503 (Telegram retries).

A raw ASGI handler: Telegram's hot path needs none of Litestar's request parsing, dependency
injection or response machinery, which cost more than the secret check, the decode and the
commit together (measured: ~6,000/s for the Litestar handler without any insert, against
~15,000/s for a bare /healthz).
"""

from __future__ import annotations

import hmac
import logging

import apsw
import msgspec
from litestar import asgi
from litestar.types import Receive, Scope, Send

from lib.errors import AshError
from lib.runtime import get_runtime
from lib.webhook_intake import Rejected, accept, header, read_limited, wake_processor

log = logging.getLogger("ash.webhook")

SECRET_HEADER = b"x-telegram-bot-api-secret-token"
JSON_HEADERS = [(b"content-type", b"application/json")]
OK_BODY = b'{"ok":true}'


async def answer(send: Send, status: int, body: bytes) -> None:
    """A JSON response in two ASGI messages."""
    headers = [*JSON_HEADERS, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _refuse(send: Send, status: int, detail: str) -> None:
    await answer(send, status, msgspec.json.encode({"ok": False, "detail": detail}))


WEBHOOK_PATH = "/telegram/webhook"


async def handle_webhook(scope: Scope, receive: Receive, send: Send) -> None:
    """Receive one Telegram update (POST; Telegram sends them one request at a time).

    `scope["app"]` must be the Litestar app (for its runtime)."""
    if scope["method"] != "POST":
        await answer(send, 405, b'{"ok":false,"detail":"method not allowed"}')
        return
    runtime = get_runtime(scope["app"])
    expected = runtime.settings.secrets.telegram_webhook_secret
    if not expected:
        log.warning("webhook refused (403): TELEGRAM_WEBHOOK_SECRET is not set, so no update can be trusted")
        await _refuse(send, 403, "webhook disabled: TELEGRAM_WEBHOOK_SECRET is not set")
        return
    given = header(scope, SECRET_HEADER) or b""
    if not hmac.compare_digest(given, expected.encode()):
        await _refuse(send, 401, "missing or wrong secret token")
        return
    try:
        body = await read_limited(scope, receive, runtime.settings.config.server.max_body_bytes)
        # Committed before the 200, off the event loop (group commit: lib/inbox_writer.py).
        queued = await accept(runtime, body)
    except Rejected as exc:
        await _refuse(send, exc.status, exc.detail)
        return
    except (AshError, apsw.Error) as exc:
        # Not stored, whatever the reason: 503 so Telegram delivers it again later.
        log.error("update not stored, answering 503: %s", exc)
        await _refuse(send, 503, "update not stored; retry later")
        return
    if queued:  # tell the processor (it only sets an event; the turn runs after this response)
        wake_processor(runtime)
    await answer(send, 200, OK_BODY)


# The same handler as a Litestar route, for the test client and for paths the server's fast path
# does not take (`/telegram/webhook/`, which Litestar normalises).
telegram_webhook = asgi(WEBHOOK_PATH, is_mount=False, copy_scope=False)(handle_webhook)
