"""Faults of the Bot API while an answer is delivered, each written as the fault it survives: the
real Telegram handler, sink and agent turn (the model stubbed at the network edge), the fake Bot API.

- 403 "bot was blocked by the user" on a streaming send: the chat is marked blocked and nothing
  more is sent (it was handled as a model failure: a traceback, then "Something went wrong...").
- 429 `retry_after: 5` on the first sendMessage: every later send to that chat waits it out (the
  final answer went out 0.1 s later).
- A forum topic whose question was deleted before the answer: the answer goes out without the
  reply (Telegram ignores allow_sending_without_reply in topics; all three sends failed with 400).
"""

from __future__ import annotations

import logging

import httpx
import pytest

from lib.db import one
from lib.telegram.approvals import run_agent_turn
from lib.telegram.client import TelegramClient
from lib.telegram.updates import telegram_worker
from tests.support.agent import ANTHROPIC_MESSAGES, set_keys, sse_response
from tests.support.telegram import (
    API,
    TOKEN,
    deliver,
    forum_topic_text,
    load,
    make_runtime,
    person,
    point_at_fake_bot_api,
    private_text,
)

USER = 408258968  # the sender of the recorded private text update
TOPIC = 2391  # the recorded forum topic
FORUM = -1001971186208
BLOCKED = load("error_403_bot_blocked_by_user.json")  # recorded
# The recorded 429 (error_429_retry_after.json) with the five seconds of the report.
FLOOD = {
    "ok": False,
    "error_code": 429,
    "description": "Too Many Requests: retry after 5",
    "parameters": {"retry_after": 5},
}
# The envelope filled in from the Bot API docs around a description seen in real reports.
REPLY_GONE = {"ok": False, "error_code": 400, "description": "Bad Request: message to be replied not found"}


@pytest.fixture
def env(db_path, monkeypatch, ash_home):
    config = f'owner = {USER}\n[embeddings]\nprovider = "none"\n[memory]\nextraction_enabled = false\n'
    point_at_fake_bot_api(monkeypatch, ash_home, config)
    set_keys(monkeypatch, openai=False)


class FakeTime:
    """The client's clock and sleep: a sleep moves the clock, and says how many Bot API calls
    had been made when it began."""

    def __init__(self, bot):
        self.bot = bot
        self.now = 1000.0
        self.slept: list[tuple[int, float]] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append((len(self.bot.calls), seconds))
        self.now += seconds


async def answer(update: dict, httpx2_mock, client_for=None) -> tuple:
    route = httpx2_mock.post(ANTHROPIC_MESSAGES).mock(return_value=sse_response("anthropic", "stream_text.sse"))
    async with httpx.AsyncClient() as http:
        runtime = make_runtime(http)
        client = client_for(http) if client_for else None
        deliver(runtime, update)
        worker = telegram_worker(runtime, runner=lambda turn, sink: run_agent_turn(runtime, turn, sink), client=client)
        await worker.drain()
        state = one(runtime.db.conn(), "SELECT blocked_at FROM chats WHERE chat_id = ?", (str(USER),))
        runtime.db.close()
    return route, state


def sends(bot, method: str = "sendMessage") -> list[dict]:
    return [body for name, body in bot.calls if name == method]


async def test_blocked_mid_answer_marks_the_chat_and_sends_nothing_more(env, bot, httpx2_mock, caplog):
    bot.fail["sendMessage"] = [(403, BLOCKED)]
    with caplog.at_level(logging.INFO):
        route, state = await answer(private_text(1, "hello"), httpx2_mock)

    assert len(sends(bot)) == 1, "a second message went to a chat that blocked the bot"
    assert sends(bot, "editMessageText") == []
    assert route.call_count == 1
    assert state is not None and state["blocked_at"] is not None
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


async def test_a_flood_wait_on_the_first_send_holds_every_later_send_to_that_chat(env, bot, httpx2_mock):
    bot.fail["sendMessage"] = [(429, FLOOD)]
    fake = FakeTime(bot)

    def client(http):
        return TelegramClient(http, TOKEN, API, sleep=fake.sleep, clock=fake.clock)

    await answer(private_text(1, "hello"), httpx2_mock, client_for=client)

    assert [m["text"] for m in bot.sent_to(USER)] == ["Hello there!"]
    refused, delivered = sends(bot)[0], sends(bot)[1]
    assert refused["chat_id"] == delivered["chat_id"] == USER
    # Between the 429 (the first call to the chat) and the message that landed, the client waited
    # the five seconds out; the old client sent the final answer at once.
    index = [name for name, _ in bot.calls].index("sendMessage")
    waits = [seconds for calls, seconds in fake.slept if calls == index + 1]
    assert waits and sum(waits) >= 5.0


async def test_a_deleted_question_in_a_forum_topic_still_gets_its_answer(env, bot, httpx2_mock):
    bot.fail["sendMessage"] = [(400, REPLY_GONE)]
    update = forum_topic_text(3000, "@el_mon_test_bot plan the trip", person(USER, "Hirrolot", "hirrolot"))
    await answer(update, httpx2_mock)

    refused, delivered = sends(bot)
    assert refused["reply_parameters"]["message_id"] == 3000
    assert "reply_parameters" not in delivered and delivered["message_thread_id"] == TOPIC
    assert [m["text"] for m in bot.sent_to(FORUM)] == ["Hello there!"]
