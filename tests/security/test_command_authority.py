"""Attacks on commands: a /stop from someone who may not stop the running turn, and a flood of
strangers. Through the real Telegram handler over a real SQLite inbox and a fake Bot API."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from lib.agent import TurnResult
from lib.telegram.intake import store_update
from lib.telegram.updates import telegram_worker
from tests.support.database import inbox_statuses, query
from tests.support.telegram import GROUP, echo_runner, group_text, make_runtime, point_at_fake_bot_api, private_text

OWNER, ALICE, BOB, STRANGER = 1001, 2002, 3003, 4004
BOT_NAME = "el_mon_test_bot"  # tests/fixtures/telegram/getMe_ok.json


@pytest.fixture
def env(db_path, monkeypatch, ash_home):
    point_at_fake_bot_api(monkeypatch, ash_home, f"owner = {OWNER}\n[telegram]\nallowed_users = [{ALICE}, {BOB}]\n")
    return db_path


@pytest.fixture
async def runtime(env):
    async with httpx.AsyncClient() as http:
        yield make_runtime(http)


def deliver(runtime, *updates: dict) -> None:
    for update in updates:
        store_update(runtime, json.dumps(update).encode())


async def run_then_stop(runtime, first: dict, stop: dict) -> bool:
    """Start `first` as an endless turn, deliver `stop` while it runs; True if the stop ended it
    (rather than the shutdown at the end of this helper, which releases it for the next process)."""
    started = asyncio.Event()

    async def endless(turn, sink):
        await sink.update("thinking")
        started.set()
        await asyncio.sleep(60)
        return TurnResult("never")

    worker = telegram_worker(runtime, runner=endless)
    deliver(runtime, first)
    task = asyncio.create_task(worker.drain())
    await asyncio.wait_for(started.wait(), 5)
    deliver(runtime, stop)
    for _ in range(3):
        await worker.pump()  # what a webhook kick does
    await asyncio.sleep(0.05)
    stopped = task.done()
    if not stopped:
        await worker.stop()
        task.cancel()
    row = query(
        runtime.settings.database_path,
        "SELECT status, last_error FROM inbox WHERE update_id = ?",
        (first["update_id"],),
    )[0]
    assert stopped == (row["status"] == "done" and row["last_error"] == "stopped by /stop")
    return stopped


@pytest.mark.parametrize(
    ("stop_text", "sender", "stops"),
    [
        ("/stop", STRANGER, False),  # not allowed at all
        (f"/stop@{BOT_NAME}", STRANGER, False),
        ("/stop@other_bot", ALICE, False),  # another bot's command
        ("/stop", BOB, False),  # allowed, but not Bob's turn
        ("/stop", ALICE, True),  # her own turn
        (f"/stop@{BOT_NAME}", OWNER, True),  # the owner may stop any turn
    ],
)
async def test_only_the_turns_own_sender_or_the_owner_stops_it_in_a_group(runtime, bot, stop_text, sender, stops):
    first, stop = group_text(10, f"@{BOT_NAME} write a novel", ALICE), group_text(11, stop_text, sender)
    assert await run_then_stop(runtime, first, stop) is stops
    said = [m["text"] for m in bot.sent_to(GROUP)]
    assert ("Stopped." in said) is stops


async def test_in_a_private_chat_the_allowed_sender_stops_their_turn(runtime, bot):
    assert await run_then_stop(runtime, private_text(20, "write a novel", ALICE), private_text(21, "/stop", ALICE))


async def test_a_flood_of_strangers_is_denied_a_bounded_number_of_times_and_leaves_little(runtime, bot, env):
    calls = []
    strangers = [private_text(100 + i, "hi", 5_000_000 + i, username=f"s{i}") for i in range(60)]
    in_group = [group_text(300 + i, f"@{BOT_NAME} hi", 6_000_000 + i) for i in range(10)]
    deliver(runtime, *strangers, *in_group)
    await telegram_worker(runtime, runner=echo_runner(calls)).drain()
    assert calls == []
    denials = [m for m in bot.methods() if m == "sendMessage"]
    assert len(denials) == 20  # lib/telegram/chats.py DENIALS_PER_MINUTE
    assert bot.sent_to(GROUP) == []  # never in a group
    chats = query(env, "SELECT chat_id, type, title, denied_notice_at FROM chats")
    assert len(chats) == 20 and all(c["denied_notice_at"] and c["title"] is None for c in chats)
    assert set(inbox_statuses(env).values()) == {"done"}


async def test_a_stranger_is_denied_once_not_per_message(runtime, bot):
    deliver(runtime, *(private_text(400 + i, "hello?", STRANGER) for i in range(3)))
    await telegram_worker(runtime, runner=echo_runner()).drain()
    assert len(bot.sent_to(STRANGER)) == 1 and str(STRANGER) in bot.sent_to(STRANGER)[0]["text"]
