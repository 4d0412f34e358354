"""The door in front of the whole app: the writer rule and the restore gate.

- On a machine that is not the writer (lib/replica/writer_rule.py), every request that may write
  (the webhook, `/admin`, `/admin/ui`, `/mcp`) is answered at once with a `fly-replay` header
  naming the writer: Fly's proxy replays it there. Off Fly nobody honours the header, so the
  answer is a 503 that Telegram (and any careful client) retries.
- On the writer, while a restore swaps the database (lib/web/restore.py), webhooks get 503 and
  Telegram delivers them again later; the ones already inside are counted, and the restore
  waits for them to be stored before it copies anything.
"""

from __future__ import annotations

import asyncio
import time

from litestar import Litestar
from litestar.types import ASGIApp, Receive, Scope, Send

from lib.replica.writer_rule import WriterRule

# Paths whose requests may write: replayed to the writer from any other machine.
WRITING_PATHS = ("/telegram/webhook", "/admin", "/mcp")
REPLAY_BODY = b'{"ok":false,"detail":"replayed to the writer machine"}'
PAUSED_BODY = b'{"ok":false,"detail":"restoring the database; retry shortly"}'
# Seconds a restore waits for webhooks already inside to be stored.
DRAIN_TIMEOUT = 30.0


def _under(path: str, prefixes: tuple[str, ...]) -> bool:
    return any(path == prefix or path.startswith(prefix + "/") for prefix in prefixes)


class RestoreGate:
    """Holds webhooks out while the database is being replaced."""

    def __init__(self) -> None:
        self.paused = False
        self.inside = 0

    async def close(self, timeout: float = DRAIN_TIMEOUT) -> None:
        """Refuse new webhooks, then wait until those inside have been stored (or refused)."""
        self.paused = True
        deadline = time.monotonic() + timeout
        while self.inside and time.monotonic() < deadline:
            await asyncio.sleep(0.005)

    def open(self) -> None:
        """Let webhooks in again."""
        self.paused = False


async def _answer(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body)), *headers]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def restore_gate(app: Litestar) -> RestoreGate:
    """The gate `with_writer_door` put on the app."""
    return app.state.restore_gate


def with_writer_door(app: Litestar, inner: ASGIApp, webhook_path: str) -> ASGIApp:
    """`inner` behind the writer rule (from `app.state.writer_rule`, set by the lifespan) and the
    restore gate (put on `app.state.restore_gate`)."""
    gate = RestoreGate()
    app.state.restore_gate = gate

    async def serve(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await inner(scope, receive, send)
            return
        path = scope["path"]
        rule: WriterRule | None = app.state.get("writer_rule")
        if rule is not None and not rule.is_writer and _under(path, WRITING_PATHS):
            await _answer(send, 503, REPLAY_BODY, [(b"fly-replay", rule.replay_to.encode())])
            return
        if not _under(path, (webhook_path,)):
            await inner(scope, receive, send)
            return
        if gate.paused:
            await _answer(send, 503, PAUSED_BODY, [(b"retry-after", b"1")])
            return
        gate.inside += 1
        try:
            await inner(scope, receive, send)
        finally:
            gate.inside -= 1

    return serve
