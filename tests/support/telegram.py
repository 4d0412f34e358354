"""Test helpers for the Telegram channel: fixture payloads, a fake Bot API over respx, a runtime."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import httpx
import respx

from lib.agent.contract import TurnInput, TurnResult
from lib.config import load_settings
from lib.db import Database
from lib.runtime import Runtime
from tests.support import paths

FIXTURES = paths.FIXTURES / "telegram"
TOKEN = "110201543:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"
BOT_ID = 110201543
SECRET = "s3cret-token_for-tests-0123456789"
API = "https://tg.test"


def load(name: str) -> Any:
    """A fixture file from tests/fixtures/telegram as Python data."""
    return json.loads(FIXTURES.joinpath(name).read_text(encoding="utf-8"))


def private_text(update_id: int, text: str, user_id: int = 408258968, username: str = "hirrolot") -> dict:
    """The recorded private text update with another id, text and sender."""
    update = copy.deepcopy(load("update_message_private_text_2.json"))
    update["update_id"] = update_id
    message = update["message"]
    message["message_id"] = update_id % 100000
    message["text"] = text
    message["from"]["id"] = message["chat"]["id"] = user_id
    message["from"]["username"] = message["chat"]["username"] = username
    if text.startswith("/"):
        message["entities"] = [{"offset": 0, "length": len(text.split()[0]), "type": "bot_command"}]
    return update


GROUP = -1009876543210


def group_text(update_id: int, text: str, sender: int, chat_type: str = "supergroup") -> dict:
    """A message in the GROUP chat from `sender`; a leading command or @mention is marked as
    Telegram marks it."""
    update = private_text(update_id, text, sender, username=f"user{sender}")
    message = update["message"]
    message["chat"] = {"id": GROUP, "type": chat_type, "title": "Family"}
    if text.startswith("@"):
        message["entities"] = [{"offset": 0, "length": len(text.split()[0]), "type": "mention"}]
    return update


def point_at_fake_bot_api(monkeypatch, ash_home, config: str) -> None:
    """Environment and config.toml for a bot whose Bot API is the FakeBotAPI at API."""
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", TOKEN)
    monkeypatch.setenv("TELEGRAM_API_BASE", API)
    ash_home.joinpath("config.toml").write_text(config)


def envelope(result: Any) -> dict:
    return {"ok": True, "result": result}


class FakeBotAPI:
    """A respx-backed Bot API that records what the bot sent and edited, message by message.

    `fail` maps a method name to a list of responses (status, body) served before normal ones.
    """

    def __init__(self, router: respx.MockRouter, base: str = API, token: str = TOKEN):
        self.calls: list[tuple[str, dict]] = []
        self.messages: dict[int, dict] = {}  # message_id -> {"chat_id", "text", "parse_mode", "edits"}
        self.fail: dict[str, list[tuple[int, dict]]] = {}
        self.next_id = 5000
        self.me = load("getMe_ok.json")
        router.route(method="POST", url__startswith=f"{base}/bot{token}/").mock(side_effect=self._handle)
        router.route(method="GET", url__startswith=f"{base}/file/bot{token}/").mock(
            return_value=httpx.Response(200, content=b"\xff\xd8\xff\xe0fake-jpeg")
        )

    def _handle(self, request: httpx.Request) -> httpx.Response:
        method = request.url.path.rsplit("/", 1)[1]
        body = json.loads(request.content or b"{}")
        self.calls.append((method, body))
        queued = self.fail.get(method)
        if queued:
            status, payload = queued.pop(0)
            return httpx.Response(status, json=payload)
        if method == "getMe":
            return httpx.Response(200, json=self.me)
        if method == "sendMessage":
            self.next_id += 1
            self.messages[self.next_id] = {
                "chat_id": body["chat_id"],
                "text": body["text"],
                "parse_mode": body.get("parse_mode"),
                "reply_markup": body.get("reply_markup"),
                "edits": 0,
            }
            sent = copy.deepcopy(load("sendMessage_ok.json"))
            sent["result"]["message_id"] = self.next_id
            sent["result"]["chat"]["id"] = body["chat_id"]
            sent["result"]["text"] = body["text"]
            return httpx.Response(200, json=sent)
        if method == "editMessageText":
            message = self.messages.get(body["message_id"])
            if message is None:
                return httpx.Response(
                    400, json={"ok": False, "error_code": 400, "description": "Bad Request: message to edit not found"}
                )
            if message["text"] == body["text"]:
                return httpx.Response(400, json=load("error_400_message_not_modified_ASSEMBLED.json"))
            message.update(text=body["text"], parse_mode=body.get("parse_mode"), edits=message["edits"] + 1)
            return httpx.Response(200, json=load("editMessageText_ok.json"))
        if method == "getFile":
            return httpx.Response(200, json=load("getFile_ok.json"))
        if method == "answerCallbackQuery":
            return httpx.Response(200, json=load("answerCallbackQuery_ok.json"))
        return httpx.Response(200, json=envelope(True))

    def sent_to(self, chat_id: int | str) -> list[dict]:
        """Messages in a chat, in the order they were sent (with their final text)."""
        return [m for _, m in sorted(self.messages.items()) if str(m["chat_id"]) == str(chat_id)]

    def methods(self) -> list[str]:
        return [method for method, _ in self.calls]


def make_runtime(http: httpx.AsyncClient) -> Runtime:
    """A runtime over the test's ASH_HOME database (migrated by the `db_path` fixture)."""
    settings = load_settings()
    return Runtime(settings=settings, db=Database(settings.database_path), http_client=http)


def echo_runner(calls: list[TurnInput] | None = None, reply: Callable[[TurnInput], str] | None = None):
    """A stand-in for lib.agent.run_turn: streams the answer in two steps, then finishes."""

    async def run(turn: TurnInput, sink) -> TurnResult:
        if calls is not None:
            calls.append(turn)
        text = reply(turn) if reply else f"You said: {turn.text}"
        await sink.typing()
        await sink.update(text[: len(text) // 2])
        await sink.finish(text)
        return TurnResult(text)

    return run
