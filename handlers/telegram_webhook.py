"""`POST /telegram/webhook`: check the secret, store the update, answer 200 at once.

Status codes (SPEC): no secret configured 403, secret missing or wrong 401, body over
server.max_body_bytes 413, body not received within server.body_timeout 408 (and the
connection closed), not JSON or no integer update_id 400, else 200. Nothing is stored
unless the answer is 200; a database that cannot take the row answers 503 (Telegram retries),
any other failure is logged and answered 500 (lib/web/errors.py, the same for both doors).

A raw ASGI handler: Telegram's hot path needs none of Litestar's request parsing, dependency
injection or response machinery, which cost more than the secret check, the decode and the
commit together (measured: ~6,000/s for the Litestar handler without any insert, against
~15,000/s for a bare /healthz). app.py serves it before Litestar's router (lib/web/fast_path.py)
and also registers it as a Litestar route below.
"""

from __future__ import annotations

import hmac
import logging

import msgspec
from litestar import asgi
from litestar.types import Receive, Scope, Send

from lib.errors import Rejected
from lib.telegram.intake import accept
from lib.web.body import header, read_limited
from lib.web.errors import status_for
from lib.web.state import get_runtime, get_services

log = logging.getLogger("ash.webhook")

WEBHOOK_PATH = "/telegram/webhook"
SECRET_HEADER = b"x-telegram-bot-api-secret-token"
JSON_HEADERS = [(b"content-type", b"application/json")]
OK_BODY = b'{"ok":true}'
DETAILS = {503: "update not stored; retry later", 500: "internal error; see the server log"}


async def answer(send: Send, status: int, body: bytes) -> None:
    """A JSON response in two ASGI messages (a 408 also closes the connection)."""
    headers = [*JSON_HEADERS, (b"content-length", str(len(body)).encode())]
    if status == 408:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _refuse(send: Send, status: int, detail: str) -> None:
    await answer(send, status, msgspec.json.encode({"ok": False, "detail": detail}))


async def handle_webhook(scope: Scope, receive: Receive, send: Send) -> None:
    """Receive one Telegram update (POST; Telegram sends them one request at a time).

    `scope["app"]` must be the Litestar app (for its runtime and services)."""
    if scope["method"] != "POST":
        await _refuse(send, 405, "method not allowed")
        return
    app = scope["app"]
    runtime = get_runtime(app)
    expected = runtime.settings.secrets.telegram_webhook_secret
    if not expected:
        log.warning("webhook refused (403): TELEGRAM_WEBHOOK_SECRET is not set, so no update can be trusted")
        await _refuse(send, 403, "webhook disabled: TELEGRAM_WEBHOOK_SECRET is not set")
        return
    given = header(scope, SECRET_HEADER) or b""
    if not hmac.compare_digest(given, expected.encode()):
        await _refuse(send, 401, "missing or wrong secret token")
        return
    services = get_services(app)
    try:
        server = runtime.settings.config.server
        body = await read_limited(scope, receive, server.max_body_bytes, server.body_timeout)
        # Committed before the 200, off the event loop (group commit: lib/inbox/group_commit.py).
        queued = await accept(runtime, services.writer, body)
    except Rejected as exc:
        await _refuse(send, exc.status, exc.detail)
        return
    except Exception as exc:
        # Not stored, whatever the reason. 503 (database busy, full, gone) makes Telegram
        # deliver it again later; anything else is a bug, logged with its traceback.
        status = status_for(exc)
        if status == 503:
            log.error("update not stored, answering 503: %s", exc)
        else:
            log.error("webhook: unexpected error, answering %d", status, exc_info=exc)
        await _refuse(send, status, DETAILS.get(status, "bad request"))
        return
    if queued and services.inbox_worker is not None:
        services.inbox_worker.kick()  # sets an event; the turn runs after this response
    await answer(send, 200, OK_BODY)


# The same handler as a Litestar route, for the test client and for paths the server's fast path
# does not take (`/telegram/webhook/`, which Litestar normalises).
telegram_webhook = asgi(WEBHOOK_PATH, is_mount=False, copy_scope=False)(handle_webhook)
