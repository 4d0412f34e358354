"""The streamed answer's messages: one message when the answer fits, no stray part left over, and
a stopped answer left as written. The real sink and client against the fake Bot API."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from lib.telegram.client import TelegramClient
from lib.telegram.format import utf16_len
from lib.telegram.sink import BLANK, TelegramSink
from tests.support.telegram import API, TOKEN

CHAT = 408258968


@pytest.fixture
async def http():
    async with httpx.AsyncClient() as client:
        yield client


def sink_for(http, **kwargs) -> TelegramSink:
    return TelegramSink(TelegramClient(http, TOKEN, API), CHAT, **kwargs)


async def test_an_answer_of_4095_units_streams_and_ends_in_one_message(http, bot):
    """With the cursor the preview would be 4,097 units: it used to spill into a second message."""
    answer = "😀" * 2047 + "!"  # 2 UTF-16 units per emoji: 4,095 units
    assert utf16_len(answer) == 4095
    sink = sink_for(http)
    await sink.update(answer)
    await sink.finish(answer)
    assert [m["text"] for m in bot.sent_to(CHAT)] == [answer]
    assert "deleteMessage" not in bot.methods()


async def test_the_cursor_shows_while_it_fits(http, bot):
    sink = sink_for(http)
    await sink.update("Thinking about it")
    assert [m["text"] for m in bot.sent_to(CHAT)] == ["Thinking about it …"]


async def test_parts_a_final_answer_no_longer_needs_are_deleted(http, bot):
    recorded: list[list[int]] = []

    async def remember(message_ids: list[int]) -> None:
        recorded.append(message_ids)

    client = TelegramClient(http, TOKEN, API)
    shown = [(await client.send_message(CHAT, f"old part {i}")).message_id for i in range(2)]
    resumed = sink_for(http, resume_message_ids=shown, on_new_message=remember)
    await resumed.finish("A short final answer.")
    assert [m["text"] for m in bot.sent_to(CHAT)] == ["A short final answer."]
    assert bot.deleted == [shown[1]]
    assert recorded[-1] == [shown[0]]  # a resumed turn will not edit the deleted part


async def test_a_part_telegram_will_not_delete_is_blanked(http, bot):
    client = TelegramClient(http, TOKEN, API)
    shown = [(await client.send_message(CHAT, f"old part {i}")).message_id for i in range(2)]
    bot.fail["deleteMessage"] = [
        (400, {"ok": False, "error_code": 400, "description": "Bad Request: message can't be deleted"})
    ]
    await sink_for(http, resume_message_ids=shown).finish("Short now.")
    assert [m["text"] for m in bot.sent_to(CHAT)] == ["Short now.", BLANK]


async def test_a_halted_answer_keeps_what_was_written_without_the_cursor_and_says_it_was_stopped(http, bot):
    clock = iter(range(100)).__next__
    sink = sink_for(http, interval=5.0, clock=lambda: clock())
    await sink.update("The first")
    await sink.update("The first half, not yet shown")  # inside the interval
    await sink.halt()
    await sink.update("more")  # after a halt nothing changes
    assert [m["text"] for m in bot.sent_to(CHAT)] == ["The first half, not yet shown\n\n<i>(stopped)</i>"]


async def test_a_turn_cancelled_while_its_message_is_on_the_way_records_it_and_edits_it_when_resumed(http, bot):
    """Shutdown and a live restore cancel running turns. Cancelled between Telegram's answer and
    the record of the message's id, a turn used to leave "Echo:  …" behind and send anew when resumed."""
    recorded: list[list[int]] = []
    arrived, go_on = asyncio.Event(), asyncio.Event()

    async def remember(message_ids: list[int]) -> None:
        arrived.set()
        await go_on.wait()  # the database write the cancellation lands in
        recorded.append(message_ids)

    turn = asyncio.create_task(sink_for(http, on_new_message=remember).update("Echo: "))
    await arrived.wait()
    turn.cancel()
    await asyncio.sleep(0)
    go_on.set()
    with pytest.raises(asyncio.CancelledError):
        await turn
    assert len(recorded) == 1, "the message's id is recorded before the cancellation goes through"
    await sink_for(http, resume_message_ids=recorded[-1]).finish("Echo: during 12")
    assert [m["text"] for m in bot.sent_to(CHAT)] == ["Echo: during 12"]
