"""A loopback Bot API for `ash init` and `ash relay`: the fault-test Upstream (sendMessage, Anthropic,
...) plus the webhook's registration and a getUpdates queue that follows Telegram's offset rules."""

from __future__ import annotations

import json
import threading

from tests.support.faults import Upstream
from tests.support.telegram import load

# Telegram's answer to getUpdates while a webhook is registered (its documented 409).
WEBHOOK_ACTIVE = (
    "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"
)


class PollingBotAPI(Upstream):
    """Upstream that also keeps a webhook registration (setWebhook, getWebhookInfo,
    deleteWebhook) and serves queued updates to getUpdates.

    As Telegram does, getUpdates returns the queued updates from `offset` on and forgets those
    below it (confirmed), holds the call open a moment when there is nothing new, and answers
    409 while a webhook is registered. Updates are kept as bytes: a test may queue one Telegram
    would never send (invalid UTF-8) to see what the relay does with a refusal."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.webhook: dict = {"url": "", "secret_token": None}
        self.updates: list[tuple[int, bytes]] = []
        self.offsets: list[int | None] = []  # the offset of every getUpdates call, in order
        self.arrived = threading.Condition(self.lock)

    def queue(self, *updates: dict | tuple[int, bytes]) -> None:
        """Make updates (dicts, or (update_id, raw bytes)) waiting for the next getUpdates."""
        with self.arrived:
            for update in updates:
                raw = update if isinstance(update, tuple) else (update["update_id"], json.dumps(update).encode())
                self.updates.append(raw)
            self.arrived.notify_all()

    def confirmed_up_to(self) -> int:
        """The highest offset a getUpdates call has sent (everything below it is confirmed)."""
        with self.lock:
            return max((o for o in self.offsets if o is not None), default=0)

    def _telegram(self, method: str, body: dict):
        if method == "getUpdates":
            return self._get_updates(body)
        with self.lock:
            if method == "getWebhookInfo":
                info = load("getWebhookInfo_ok_webhook_set.json")
                info["result"].update(url=self.webhook["url"], pending_update_count=len(self.updates))
                return 200, info
            if method == "setWebhook":
                self.webhook = {"url": body["url"], "secret_token": body.get("secret_token")}
                return 200, load("setWebhook_ok_webhook_was_set.json")
            if method == "deleteWebhook":
                self.webhook = {"url": "", "secret_token": None}
                return 200, {"ok": True, "result": True, "description": "Webhook was deleted"}
        return super()._telegram(method, body)

    def _get_updates(self, body: dict) -> tuple[int, dict | bytes]:
        offset = body.get("offset")
        with self.arrived:
            self.offsets.append(offset)
            if self.webhook["url"]:
                return 409, {"ok": False, "error_code": 409, "description": WEBHOOK_ACTIVE}
            if offset is not None:
                self.updates = [(i, raw) for i, raw in self.updates if i >= offset]
            if not self.updates:
                self.arrived.wait(min(float(body.get("timeout", 0)), 0.5))
            batch = self.updates[: body.get("limit", 100)]
        # Built by hand so each update reaches the relay byte for byte (served as bytes, the
        # stub labels it text/event-stream; the relay reads the body, not the label).
        return 200, b'{"ok":true,"result":[' + b",".join(raw for _, raw in batch) + b"]}"
