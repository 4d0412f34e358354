"""Attack (or accident): the disk fills up during a turn. The person gets one answer: no second
model call after the lease runs out, and no task dies with an exception nobody reads."""

from __future__ import annotations

import asyncio
import gc
import json

import apsw
import httpx
import respx

from lib.agent import TurnInput, run_turn
from lib.inbox import queue
from lib.memory import api as memory_api
from lib.telegram.intake import store_update
from lib.telegram.updates import telegram_worker
from tests.support.agent import ANTHROPIC_MESSAGES, RecordingSink, configured_runtime, sse_response
from tests.support.clock import Clock
from tests.support.database import inbox_statuses
from tests.support.telegram import FakeBotAPI, echo_runner, make_runtime, point_at_fake_bot_api, private_text

USER = 408258968


async def test_an_answered_update_the_database_cannot_mark_done_is_not_answered_again(
    db_path, ash_home, monkeypatch, caplog
):
    point_at_fake_bot_api(monkeypatch, ash_home, f"[telegram]\nallowed_users = [{USER}]\nlease_seconds = 30\n")
    reported: list[str] = []
    asyncio.get_running_loop().set_exception_handler(lambda loop, context: reported.append(context["message"]))
    full = {"on": True}
    finish = queue.finish

    def finish_unless_full(*args, **kwargs):
        if full["on"]:
            raise apsw.FullError("database or disk is full")
        return finish(*args, **kwargs)

    monkeypatch.setattr(queue, "finish", finish_unless_full)
    calls: list[TurnInput] = []
    with respx.mock(assert_all_called=False) as router:
        bot = FakeBotAPI(router)
        async with httpx.AsyncClient() as http:
            runtime = make_runtime(http)
            runtime.clock = clock = Clock()
            store_update(runtime, json.dumps(private_text(7001, "hello", USER)).encode())
            worker = telegram_worker(runtime, runner=echo_runner(calls))
            await worker.drain()  # answered; marking it done fails
            assert inbox_statuses(db_path) == {7001: "claimed"}
            full["on"] = False  # space again
            clock.advance(31)  # the lease runs out, as after a crash
            await worker.drain()
    gc.collect()
    assert len(calls) == 1, "the model was asked twice"
    assert [m["text"] for m in bot.sent_to(USER)] == ["You said: hello"]
    assert inbox_statuses(db_path) == {7001: "done"}
    assert "could not record what happened" in caplog.text
    assert not any("never retrieved" in message for message in reported)


async def test_a_turn_whose_exchange_cannot_be_stored_still_answers_once(ash_home, monkeypatch, httpx2_mock, sleeps):
    runtime = configured_runtime(ash_home, monkeypatch, '[embeddings]\nprovider = "none"\n')

    def disk_full(*args, **kwargs):
        raise apsw.FullError("database or disk is full")

    monkeypatch.setattr(memory_api, "record_turn", disk_full)
    route = httpx2_mock.post(ANTHROPIC_MESSAGES).mock(return_value=sse_response("anthropic", "stream_text.sse"))
    sink = RecordingSink()
    result = await run_turn(runtime, TurnInput("telegram", "42", "1001", "Say hello"), sink)
    runtime.db.close()
    assert result.ok and route.call_count == 1
    assert sink.of("finish") == [result.text] and sink.of("fail") == []
