"""Test helpers for the Telegram channel: fixture payloads, a fake Bot API over respx, a runtime."""

from __future__ import annotations

import copy
import html
import json
import re
from collections.abc import Callable
from typing import Any

import httpx
import respx

from lib.agent import TurnInput, TurnResult
from lib.config import load_settings
from lib.db import Database
from lib.runtime import Runtime
from tests.support import paths

FIXTURES = paths.FIXTURES / "telegram"
# Telegram's limit on a message's visible text, in UTF-16 code units (tags removed).
MAX_UNITS = 4096
TOO_LONG = {"ok": False, "error_code": 400, "description": "Bad Request: message is too long"}
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
        # message_id -> {"chat_id", "text", "parse_mode", "edits", and where it went: "message_thread_id",
        # "direct_messages_topic_id", "reply_parameters"}; deleted messages leave this dict
        self.messages: dict[int, dict] = {}
        self.deleted: list[int] = []
        self.commands: list[dict] = []  # the command menu (setMyCommands)
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
        if method in ("sendMessage", "editMessageText") and _units(body) > MAX_UNITS:
            return httpx.Response(400, json=TOO_LONG)
        if method == "sendMessage":
            self.next_id += 1
            self.messages[self.next_id] = {
                "chat_id": body["chat_id"],
                "text": body["text"],
                "parse_mode": body.get("parse_mode"),
                "reply_markup": body.get("reply_markup"),
                "message_thread_id": body.get("message_thread_id"),
                "direct_messages_topic_id": body.get("direct_messages_topic_id"),
                "reply_parameters": body.get("reply_parameters"),
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
            # As Telegram does: an edit without reply_markup takes the inline buttons away.
            message.update(
                text=body["text"],
                parse_mode=body.get("parse_mode"),
                reply_markup=body.get("reply_markup"),
                edits=message["edits"] + 1,
            )
            return httpx.Response(200, json=load("editMessageText_ok.json"))
        if method == "editMessageReplyMarkup":
            message = self.messages.get(body["message_id"])
            if message is None:
                return httpx.Response(
                    400, json={"ok": False, "error_code": 400, "description": "Bad Request: message to edit not found"}
                )
            message["reply_markup"] = body.get("reply_markup")
            return httpx.Response(200, json=load("editMessageText_ok.json"))
        if method == "deleteMessage":
            if self.messages.pop(body["message_id"], None) is None:
                gone = {"ok": False, "error_code": 400, "description": "Bad Request: message to delete not found"}
                return httpx.Response(400, json=gone)
            self.deleted.append(body["message_id"])
            return httpx.Response(200, json=envelope(True))
        if method == "setMyCommands":
            self.commands = body["commands"]
            return httpx.Response(200, json=envelope(True))
        if method == "getMyCommands":
            return httpx.Response(200, json=envelope(self.commands))
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


def _units(body: dict) -> int:
    """The visible length of a message Telegram is asked to show, as Telegram counts it."""
    text = body["text"]
    if body.get("parse_mode") == "HTML":
        text = html.unescape(re.sub(r"<[^>]*>", "", text))
    return len(text.encode("utf-16-le")) // 2


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


def deliver(runtime: Runtime, *updates: dict) -> None:
    """Store updates as the webhook does (validated, kind and chat read, committed)."""
    from lib.telegram.intake import store_update

    for update in updates:
        store_update(runtime, json.dumps(update).encode())


def person(user_id: int, first_name: str, username: str | None = None) -> dict:
    """A User object as Telegram sends it."""
    user = {"id": user_id, "is_bot": False, "first_name": first_name}
    if username:
        user["username"] = username
    return user


def forum_topic_text(update_id: int, text: str, sender: dict) -> dict:
    """A person's question in a forum topic: the recorded topic update (update_message_forum_topic_edited.json)
    with its service field swapped for `text` and its bot sender for `sender`. What the recording
    shows of a topic is kept: the forum chat, is_topic_message, message_thread_id, and the implicit
    reply to the topic's first message."""
    update = copy.deepcopy(load("update_message_forum_topic_edited.json"))
    update["update_id"] = update_id
    message = update["message"]
    del message["forum_topic_edited"]
    message.update({"message_id": update_id % 100000, "from": sender, "text": text})
    kind = {"/": "bot_command", "@": "mention"}.get(text[:1])
    if kind:
        message["entities"] = [{"offset": 0, "length": len(text.split()[0]), "type": kind}]
    return update


def replying_to(update: dict, replied: dict, quote: str | None = None) -> dict:
    """The update's message made a reply to `replied` (a Message), quoting part of it if `quote`."""
    message = update["message"]
    message["reply_to_message"] = replied
    if quote is not None:
        message["quote"] = {"text": quote, "position": max(replied.get("text", "").find(quote), 0), "is_manual": True}
    return update


def button_press(update_id: int, data: str, message: dict, presser: int) -> dict:
    """The recorded callback_query (update_callback_query.json) pressed by `presser` under `message`."""
    update = copy.deepcopy(load("update_callback_query.json"))
    update["update_id"] = update_id
    query = update["callback_query"]
    query.update(id=f"cb-{update_id}", data=data, message=message)
    query["from"]["id"] = presser
    return update


def buttons(message: dict) -> list[tuple[str, str]]:
    """(text, callback data) of each inline button under a sent message."""
    rows = (message.get("reply_markup") or {}).get("inline_keyboard", [])
    return [(b["text"], b["callback_data"]) for row in rows for b in row]


def as_shown(bot, chat: dict) -> dict:
    """The bot's latest message as a callback query carries it."""
    message_id = max(bot.messages)
    shown = bot.messages[message_id]
    return {
        "message_id": message_id,
        "from": {"id": BOT_ID, "is_bot": True, "first_name": "Ash"},
        "chat": chat,
        "date": 1716906786,
        "text": shown["text"],
        "reply_markup": shown["reply_markup"],
    }
