"""One update of every type, and one message of every content type, of Bot API 10.1 (the list is
tests/fixtures/telegram/bot_api_10_1_types.json, with its sources) posted to the real webhook of
the real server; its own processor answers them against the fake Bot API. Each is answered,
skipped with a log line that names it and says why, or (message content Ash cannot read, in a
private chat) answered with a clear "I can't ... yet"."""

from __future__ import annotations

import asyncio
import copy
import json

import pytest
from litestar.testing import AsyncTestClient

import lib.web.lifespan
from lib.inbox.queue import UNANSWERED_KINDS
from lib.telegram.client import ALLOWED_UPDATES
from lib.telegram.kinds import READ_CONTENT, SERVICE_CONTENT, SERVICE_REASON, UNHANDLED_UPDATES, UNREAD_CONTENT
from tests.support.database import inbox_statuses
from tests.support.telegram import SECRET, echo_runner, load, point_at_fake_bot_api, private_text

TYPES = load("bot_api_10_1_types.json")
SAMPLES = load("bot_api_10_1_samples.json")
HANDLED_UPDATES = ("message", "callback_query", "my_chat_member")
FIRST_ID = 5_000_000  # each case writes from a chat of its own: update id = user id = chat id


def test_the_list_of_types_is_what_the_code_sorts():
    """A type added to the list without being sorted in lib/telegram/kinds.py fails here."""
    assert TYPES["bot_api_version"] == "10.1"
    assert set(TYPES["update_fields"]) == {*HANDLED_UPDATES, *UNHANDLED_UPDATES}
    assert set(TYPES["message_content_fields"]) == {*READ_CONTENT, *UNREAD_CONTENT}
    assert set(TYPES["message_service_fields"]) == set(SERVICE_CONTENT)
    assert {*UNHANDLED_UPDATES, "service", "unknown"} == UNANSWERED_KINDS
    assert set(ALLOWED_UPDATES) <= set(HANDLED_UPDATES), "Telegram is asked only for kinds Ash answers"


async def test_a_recorded_edit_is_skipped_and_says_why(runtime, env, caplog):
    """Telegram is no longer asked for edits; one that still arrives is stored already skipped."""
    from lib.telegram.intake import store_update

    caplog.set_level("INFO")
    assert not store_update(runtime, json.dumps(load("update_edited_message.json")).encode())
    assert inbox_statuses(env) == {633291230: "skipped"}
    assert f"skipping update 633291230: edited_message ({UNHANDLED_UPDATES['edited_message']})" in caplog.text


def update_of_type(field: str, uid: int) -> dict:
    if field == "message":
        return private_text(uid, "hello", user_id=uid, username=f"user{uid}")
    body = copy.deepcopy(SAMPLES["updates"][field])
    if field == "callback_query":
        body.update(id=f"cb-{uid}", data=f"forget:no:{uid}")
        body["from"]["id"] = body["message"]["chat"]["id"] = uid
    if field == "my_chat_member":
        body["chat"]["id"] = body["from"]["id"] = uid
    return {"update_id": uid, field: body}


def message_with(field: str, uid: int) -> dict:
    update = private_text(uid, "", user_id=uid, username=f"user{uid}")
    message = update["message"]
    del message["text"]
    message[field] = copy.deepcopy(SAMPLES["message_fields"][field])
    return update


def cases() -> list[tuple[str, str, dict]]:
    """(what, field, update) for every update type, then every message content type."""
    found = [("update", field, None) for field in TYPES["update_fields"]]
    found += [("content", field, None) for field in TYPES["message_content_fields"]]
    found += [("service", field, None) for field in TYPES["message_service_fields"]]
    return [
        (what, field, update_of_type(field, FIRST_ID + i) if what == "update" else message_with(field, FIRST_ID + i))
        for i, (what, field, _) in enumerate(found)
    ]


@pytest.fixture
def server(db_path, monkeypatch, ash_home):
    """The app with every case's sender allowed and the agent's turn replaced by an echo."""
    allowed = ", ".join(str(FIRST_ID + i) for i in range(len(cases())))
    point_at_fake_bot_api(monkeypatch, ash_home, f"[telegram]\nallowed_users = [{allowed}]\n")
    monkeypatch.setenv("TELEGRAM_WEBHOOK_SECRET", SECRET)
    turns = []
    monkeypatch.setattr(lib.web.lifespan, "agent_turn", lambda runtime, services: echo_runner(turns))
    from app import app

    return app, turns


async def settled(db_path) -> dict[int, str]:
    for _ in range(500):
        statuses = inbox_statuses(db_path)
        if statuses and not {"pending", "claimed"} & set(statuses.values()):
            return statuses
        await asyncio.sleep(0.02)
    raise AssertionError(f"updates still waiting: {inbox_statuses(db_path)}")


def expected(what: str, field: str, uid: int) -> tuple[str, str | None]:
    """(inbox status, the log line Ash writes) for a case; the replies are checked apart."""
    if what == "update" and field in UNHANDLED_UPDATES:
        return "skipped", f"skipping update {uid}: {field} ({UNHANDLED_UPDATES[field]})"
    if what == "service" and field in ("migrate_to_chat_id", "migrate_from_chat_id"):
        # A group became a supergroup: its state moves to the new id (lib/telegram/chat_moves.py).
        return "done", "became the supergroup"
    if what == "service":
        return "skipped", f"skipping update {uid}: service ({field}, {SERVICE_REASON})"
    if field == "my_chat_member":
        return "done", f"chat {uid}: bot is now kicked"
    return "done", None


async def test_every_update_and_message_type_is_answered_skipped_or_declined(server, bot, db_path, caplog):
    app, turns = server
    table = cases()
    caplog.set_level("INFO")
    async with AsyncTestClient(app) as client:
        for _, _, update in table:
            response = await client.post(
                "/telegram/webhook",
                content=json.dumps(update).encode(),
                headers={"x-telegram-bot-api-secret-token": SECRET, "content-type": "application/json"},
            )
            assert response.status_code == 200
        statuses = await settled(db_path)
    answered_queries = {body["callback_query_id"] for method, body in bot.calls if method == "answerCallbackQuery"}
    images = {turn.chat_id: len(turn.images) for turn in turns}
    wrong = []
    for what, field, update in table:
        uid = update["update_id"]
        replies = [m["text"] for m in bot.sent_to(uid)]
        status, line = expected(what, field, uid)
        if statuses[uid] != status:
            wrong.append(f"{what} {field}: inbox {statuses[uid]}, expected {status}")
        if line is not None and line not in caplog.text:
            wrong.append(f"{what} {field}: no log line {line!r}")
        if field == "callback_query" and f"cb-{uid}" not in answered_queries:
            wrong.append("callback_query: the press was not answered")
        if what == "content" and field in UNREAD_CONTENT and replies != [UNREAD_CONTENT[field]]:
            wrong.append(f"content {field}: told {replies}, not that it is not supported")
        if (what, field) in (("update", "message"), ("content", "text")) and replies != ["You said: hello"]:
            wrong.append(f"{what} {field}: answered {replies}")
        if what == "content" and field == "photo" and (images.get(str(uid)) != 1 or not replies):
            wrong.append(f"content photo: the turn saw {images.get(str(uid))} image(s), replies {replies}")
        if status == "skipped" and replies:
            wrong.append(f"{what} {field}: skipped, yet the chat got {replies}")
    assert not wrong, "\n".join(wrong)
    assert "does not decode" not in caplog.text
