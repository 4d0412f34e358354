"""Long-poll Telegram and hand each update to the webhook, for a server with no public URL.

`ash relay` runs beside `ash serve` on a laptop or a Raspberry Pi behind NAT: it calls
getUpdates and POSTs each update, byte for byte, to the webhook with the secret header, as
Telegram itself would. The server stays webhook-only and its inbox keeps the exactly-once
guarantees: an update delivered twice (the relay restarted before Telegram saw the new offset)
is stored once.

Telegram forgets an update once getUpdates is called with a higher offset, so the offset moves
past an update only when the webhook took it (200) or refused it for good (another 4xx, logged).
408, 429, 5xx and network errors are retried with backoff, in order. What retrying cannot fix
stops the relay with the command that does: a 409 from getUpdates (a webhook is registered, or
another program polls the same bot), a refused secret (401, 403) or nothing at the URL (404, 405).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import httpx
import msgspec

from lib.errors import RelayStopped
from lib.retry import Backoff, Sleep
from lib.telegram.client import ALLOWED_UPDATES
from lib.telegram.types import UPDATE_ID_DECODER

log = logging.getLogger("ash.relay")

# Where `ash serve` takes updates (handlers/telegram_webhook.py WEBHOOK_PATH; handlers sit above lib).
WEBHOOK_PATH = "/telegram/webhook"
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"  # noqa: S105 (the header's name)
# Seconds Telegram holds a getUpdates call open while no update arrives (long polling).
POLL_SECONDS = 50
# Webhook answers that mean the relay is set up wrong: retrying cannot help, skipping would lose
# every update.
SETUP_ERRORS = {
    401: "the server refused the secret: run `ash relay` with the same TELEGRAM_WEBHOOK_SECRET as `ash serve`",
    403: "the server has no TELEGRAM_WEBHOOK_SECRET: load the same secrets.env for `ash serve` and `ash relay`",
    404: "nothing takes updates at {url}: check --url (it ends in /telegram/webhook)",
    405: "nothing takes updates at {url}: check --url (it ends in /telegram/webhook)",
}
RETRIED = {408, 429}


class _Polled(msgspec.Struct):
    """A getUpdates answer; updates stay raw bytes so the webhook gets exactly what Telegram sent."""

    ok: bool
    result: list[msgspec.Raw] = []
    description: str = ""
    parameters: dict = {}


_POLLED = msgspec.json.Decoder(_Polled)


class _Retry(Exception):
    """A failure worth another attempt after a pause (`after`: the wait Telegram asked for)."""

    def __init__(self, reason: str, after: float | None = None):
        super().__init__(reason)
        self.after = after


def default_webhook_url(host: str, port: int) -> str:
    """The webhook of `ash serve` on this machine, from its configured host and port."""
    if host in ("", "0.0.0.0", "::"):  # noqa: S104 (listening everywhere: reach it on loopback)
        host = "127.0.0.1"
    return f"http://{f'[{host}]' if ':' in host else host}:{port}{WEBHOOK_PATH}"


def _conflict(description: str) -> RelayStopped:
    if "webhook" in description.lower():
        return RelayStopped(
            "Telegram holds this bot's updates for a webhook, and getUpdates works only without one: "
            "run `ash webhook delete`, then `ash relay` again"
        )
    return RelayStopped(
        "another program is reading this bot's updates (another `ash relay`, or a bot polling with the "
        "same token): stop it, then run `ash relay` again"
    )


@dataclass
class Relay:
    """getUpdates -> POST webhook, one update at a time, in order."""

    http: httpx.AsyncClient
    token: str
    api_base: str
    webhook_url: str
    secret: str
    poll_seconds: int = POLL_SECONDS
    # A local server restarting is back within seconds: retry often, never give up.
    backoff: Backoff = field(default_factory=lambda: Backoff(base=0.25, max_delay=5.0))
    sleep: Sleep = asyncio.sleep
    # Told after each answered poll: `ash relay` keeps a heartbeat that `ash doctor` reads.
    on_poll: Callable[[], None] | None = None

    def __repr__(self) -> str:
        return f"Relay({self.webhook_url})"

    async def run(self) -> None:
        """Relay until stopped (cancelled, or RelayStopped for a problem the operator must fix)."""
        offset: int | None = None  # None at first: Telegram starts from its oldest unconfirmed update
        while True:
            polled = await self._patiently("getUpdates", self._poll, offset)
            if self.on_poll is not None:
                self.on_poll()
            for update_id, body in polled:
                await self._patiently(f"update {update_id}", self._deliver, update_id, body)
                offset = update_id + 1

    async def _patiently[T](self, what: str, attempt: Callable[..., Awaitable[T]], *args) -> T:
        """`await attempt(*args)` until it succeeds; _Retry pauses with backoff, anything else is raised."""
        failures = 0
        while True:
            try:
                return await attempt(*args)
            except _Retry as exc:
                # Flood control's wait is sat out however long: the relay has nothing else to do.
                wait = exc.after if exc.after is not None else self.backoff.delay(failures)
                log.warning("%s: %s; retrying in %.1f s", what, exc, wait)
                await self.sleep(wait)
                failures += 1

    async def _poll(self, offset: int | None) -> list[tuple[int, bytes]]:
        params: dict = {"timeout": self.poll_seconds, "allowed_updates": ALLOWED_UPDATES}
        if offset is not None:
            params["offset"] = offset
        try:
            response = await self.http.post(
                f"{self.api_base}/bot{self.token}/getUpdates", json=params, timeout=self.poll_seconds + 15
            )
        except httpx.TransportError as exc:
            raise _Retry(f"Telegram unreachable ({type(exc).__name__})") from None
        try:
            polled = _POLLED.decode(response.content)
        except msgspec.DecodeError:
            raise _Retry(f"HTTP {response.status_code} without a Bot API answer") from None
        if polled.ok:
            return [(UPDATE_ID_DECODER.decode(raw).update_id, bytes(raw)) for raw in polled.result]
        if response.status_code == 409:
            raise _conflict(polled.description)
        if response.status_code in (401, 404):
            raise RelayStopped(f"Telegram refused the bot token ({polled.description}): check TELEGRAM_BOT_TOKEN")
        after = polled.parameters.get("retry_after")
        raise _Retry(f"Telegram answered {response.status_code} {polled.description}".rstrip(), after)

    async def _deliver(self, update_id: int, body: bytes) -> None:
        headers = {SECRET_HEADER: self.secret, "content-type": "application/json"}
        try:
            response = await self.http.post(self.webhook_url, content=body, headers=headers, timeout=30)
        except httpx.TransportError as exc:
            raise _Retry(f"webhook unreachable ({type(exc).__name__})") from None
        status = response.status_code
        if 200 <= status < 300:
            log.info("update %s delivered", update_id)
        elif status in SETUP_ERRORS:
            raise RelayStopped(f"{SETUP_ERRORS[status].format(url=self.webhook_url)} (HTTP {status})")
        elif status in RETRIED or status >= 500:
            raise _Retry(f"webhook answered {status}")
        elif 400 <= status < 500:
            # The server will never take this one (it says why); holding it would stall every update after it.
            log.warning("update %s refused by the webhook with %s, skipped: %s", update_id, status, response.text[:200])
        else:
            raise RelayStopped(f"the webhook answered {status} (a redirect?): give --url the final http(s) URL")
