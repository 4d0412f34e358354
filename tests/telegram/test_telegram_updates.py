"""The worker over a real SQLite inbox and a fake Bot API: exactly once, in order, access, commands."""

from __future__ import annotations

import asyncio
import copy
import json

import httpx

from lib.agent import TurnResult
from lib.db import connect, one, rows
from lib.inbox import queue as inbox
from lib.telegram.intake import store_update
from lib.telegram.updates import telegram_worker
from tests.support.database import inbox_statuses
from tests.support.telegram import BOT_ID, deliver, echo_runner, load, make_runtime, private_text
from tests.telegram.conftest import USER


async def test_same_update_delivered_twice_gets_one_reply(runtime, bot, env):
    calls = []
    update = private_text(1001, "hello")
    deliver(runtime, update, update)
    worker = telegram_worker(runtime, runner=echo_runner(calls))
    await worker.drain()
    deliver(runtime, update)  # a late retry by Telegram after the answer
    await worker.drain()
    assert [m["text"] for m in bot.sent_to(USER)] == ["You said: hello"]
    assert len(calls) == 1
    assert inbox_statuses(env) == {1001: "done"}


async def test_concurrent_workers_on_one_database_reply_once_each_in_order(runtime, bot, env):
    """Two workers (as two server processes would) race for the same inbox."""
    order: list[str] = []

    async def slow_runner(turn, sink):
        order.append(turn.text)
        await asyncio.sleep(0.01)
        await sink.finish(f"re: {turn.text}")
        return TurnResult(f"re: {turn.text}")

    other_user = 714862471
    updates = [private_text(2000 + i, f"m{i}") for i in range(6)]
    updates += [private_text(3000 + i, f"o{i}", user_id=other_user, username="candyflipline") for i in range(4)]
    deliver(runtime, *updates, *updates)
    first = telegram_worker(runtime, runner=slow_runner)
    second = telegram_worker(runtime, runner=slow_runner)
    await asyncio.gather(first.drain(), second.drain(), first.drain())
    assert [m["text"] for m in bot.sent_to(USER)] == [f"re: m{i}" for i in range(6)]
    assert [m["text"] for m in bot.sent_to(other_user)] == [f"re: o{i}" for i in range(4)]
    assert [t for t in order if t.startswith("m")] == [f"m{i}" for i in range(6)]
    assert set(inbox_statuses(env).values()) == {"done"}


async def test_pending_updates_of_one_chat_run_in_update_id_order_even_if_stored_out_of_order(runtime, bot):
    seen = []
    deliver(runtime, private_text(12, "third"), private_text(10, "first"), private_text(11, "second"))
    await telegram_worker(runtime, runner=echo_runner(seen)).drain()
    assert [t.text for t in seen] == ["first", "second", "third"]
    assert [m["text"] for m in bot.sent_to(USER)] == ["You said: first", "You said: second", "You said: third"]


async def test_unknown_user_is_told_their_id_once(runtime, bot, env):
    stranger = 55501
    deliver(runtime, private_text(20, "hi", user_id=stranger, username="nobody"))
    deliver(runtime, private_text(21, "hello?", user_id=stranger, username="nobody"))
    calls = []
    await telegram_worker(runtime, runner=echo_runner(calls)).drain()
    sent = bot.sent_to(stranger)
    assert len(sent) == 1 and "55501" in sent[0]["text"]
    assert calls == []


async def test_username_entry_is_pinned_to_the_first_id(runtime, bot, env):
    first = load("update_message_start_bot_command.json")  # @candyflipline, id 714862471
    impostor = copy.deepcopy(first)
    impostor["update_id"] += 1
    impostor["message"]["from"]["id"] = impostor["message"]["chat"]["id"] = 999
    worker = telegram_worker(runtime, runner=echo_runner())
    deliver(runtime, first)
    await worker.drain()
    deliver(runtime, impostor)
    await worker.drain()
    assert "Hello" in bot.sent_to(714862471)[0]["text"]
    assert "999" in bot.sent_to(999)[0]["text"]  # the denial notice
    conn = connect(env)
    assert one(conn, "SELECT user_id FROM allowed_users WHERE entry = '@candyflipline'")["user_id"] == "714862471"
    conn.close()


async def test_users_allowed_at_runtime_take_effect_without_restart(runtime, bot, env):
    from lib.conversation.access import allow

    worker = telegram_worker(runtime, runner=echo_runner())
    deliver(runtime, private_text(30, "first try", user_id=4242, username="late"))
    await worker.drain()
    conn = connect(env)
    allow(conn, "4242")
    conn.close()
    deliver(runtime, private_text(31, "second try", user_id=4242, username="late"))
    await worker.drain()
    assert [m["text"] for m in bot.sent_to(4242)][1] == "You said: second try"


async def test_commands_new_memory_forget(runtime, bot, env):
    from lib.memory import store

    conn = connect(env)
    session = store.open_session(conn, "telegram", str(USER), str(USER), "private")
    store.add_message(conn, session.id, str(USER), "user", "remember I like tea")
    conn.close()
    deliver(runtime, private_text(40, "/new"), private_text(41, "/memory"), private_text(42, "/forget"))
    await telegram_worker(runtime, runner=echo_runner()).drain()
    replies = bot.sent_to(USER)
    assert replies[0]["text"].startswith("Started a new conversation")
    assert replies[2]["reply_markup"]["inline_keyboard"][0][0]["callback_data"] == f"forget:yes:{USER}"
    conn = connect(env)
    assert one(conn, "SELECT closed_at FROM sessions WHERE id = ?", (session.id,))["closed_at"] is not None

    press = load("update_callback_query.json")
    press["callback_query"]["from"]["id"] = USER
    press["callback_query"]["message"]["chat"]["id"] = USER
    press["callback_query"]["message"]["message_id"] = max(bot.messages)
    press["callback_query"]["data"] = f"forget:yes:{USER}"
    deliver(runtime, press)
    await telegram_worker(runtime, runner=echo_runner()).drain()
    assert "answerCallbackQuery" in bot.methods()
    assert bot.messages[max(bot.messages)]["text"].startswith("Done: I forgot")
    assert one(conn, "SELECT count(*) AS n FROM messages WHERE owner_user_id = ?", (str(USER),))["n"] == 0
    conn.close()


async def test_stop_cancels_the_running_turn_ahead_of_the_queue(runtime, bot, env):
    started = asyncio.Event()
    cancelled = []

    async def endless(turn, sink):
        await sink.update("thinking")
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.append(turn.text)
            raise
        return TurnResult("never")

    worker = telegram_worker(runtime, runner=endless)
    deliver(runtime, private_text(50, "write a novel"))
    task = asyncio.create_task(worker.drain())
    await asyncio.wait_for(started.wait(), 5)
    deliver(runtime, private_text(51, "/stop"))
    await worker.pump()  # what a webhook kick does
    await asyncio.wait_for(task, 5)
    assert cancelled == ["write a novel"]
    assert bot.sent_to(USER)[-1]["text"] == "Stopped."
    assert inbox_statuses(env) == {50: "done", 51: "done"}


async def test_album_photos_make_one_turn_with_all_images(runtime, bot):
    photo = load("message_photo_private.json")
    updates = []
    for i in range(3):
        message = copy.deepcopy(photo)
        message.update(message_id=700 + i, media_group_id="album-1")
        message["from"]["id"] = message["chat"]["id"] = USER
        if i == 0:
            message["caption"] = "what are these?"
        updates.append({"update_id": 70 + i, "message": message})
    deliver(runtime, *updates)
    seen = []
    await telegram_worker(runtime, runner=echo_runner(seen), album_wait=0).drain()
    assert len(seen) == 1
    assert seen[0].text == "what are these?" and len(seen[0].images) == 3
    assert seen[0].images[0].data.startswith(b"\xff\xd8")
    assert len(bot.sent_to(USER)) == 1


async def test_voice_gets_a_clear_not_supported_reply(runtime, bot):
    voice = load("update_voice_docs_example.json")
    voice["message"]["from"]["id"] = voice["message"]["chat"]["id"] = USER
    deliver(runtime, voice)
    await telegram_worker(runtime, runner=echo_runner()).drain()
    assert "voice" in bot.sent_to(USER)[0]["text"]


async def test_permanent_failure_stops_retrying_and_tells_the_user_once(runtime, bot, env, ash_home):
    async def broken(turn, sink):
        raise RuntimeError("model exploded")

    ash_home.joinpath("config.toml").write_text(f"[telegram]\nallowed_users = [{USER}]\nmax_attempts = 2\n")
    async with httpx.AsyncClient() as http:
        rt = make_runtime(http)
        deliver(rt, private_text(60, "hi"))
        worker = telegram_worker(rt, runner=broken)
        await worker.drain()
        assert inbox_statuses(env) == {60: "pending"}  # first failure: retried later
        conn = connect(env)
        conn.execute("UPDATE inbox SET not_before = NULL")
        conn.close()
        await worker.drain()
        await worker.drain()
    assert inbox_statuses(env) == {60: "failed"}
    sent = bot.sent_to(USER)
    assert len(sent) == 1 and "could not answer" in sent[0]["text"]


async def test_claim_of_a_dead_process_is_resumed_editing_its_message(runtime, bot, env):
    """A crash after the reply was started: the next process edits that message, sends no other."""
    deliver(runtime, private_text(80, "explain"))
    conn = connect(env)
    dead = "somehost:1:deadbeef"
    assert inbox.claim(conn, BOT_ID, dead, lease_seconds=0.01) is not None
    started = await telegram_worker(runtime, runner=echo_runner()).handler.client.send_message(USER, "Partial ans …")
    inbox.record_reply(conn, BOT_ID, 80, dead, str(USER), [started.message_id])
    conn.close()
    await asyncio.sleep(0.02)  # the dead process's lease runs out
    await telegram_worker(runtime, runner=echo_runner()).drain()
    assert [m["text"] for m in bot.sent_to(USER)] == ["You said: explain"]
    assert inbox_statuses(env) == {80: "done"}


async def test_shutdown_releases_claims_for_the_next_process(runtime, bot, env):
    started = asyncio.Event()

    async def hang(turn, sink):
        started.set()
        await asyncio.sleep(60)

    deliver(runtime, private_text(90, "long"))
    worker = telegram_worker(runtime, runner=hang)
    await worker.start()
    await asyncio.wait_for(started.wait(), 5)
    await worker.stop()
    conn = connect(env)
    row = inbox.get(conn, BOT_ID, 90)
    conn.close()
    assert row["status"] == "pending" and row["claimed_by"] is None and row["attempts"] == 0


async def test_group_messages_need_a_mention_or_a_reply_and_stay_scoped_to_the_asker(runtime, bot, env):
    seen = []
    base = load("update_message_supergroup_reply_to_message_bot_command.json")
    group = base["message"]["chat"]["id"]
    plain_chat = copy.deepcopy(base)
    plain_chat["message"].update(text="just chatting", entities=[])
    plain_chat["message"]["from"]["id"] = USER
    mention = copy.deepcopy(plain_chat)
    mention["update_id"] += 1
    mention["message"]["text"] = "@el_mon_test_bot what time is it?"
    mention["message"]["entities"] = [{"offset": 0, "length": 16, "type": "mention"}]
    reply = copy.deepcopy(plain_chat)
    reply["update_id"] += 2
    reply["message"]["text"] = "and tomorrow?"
    reply["message"]["reply_to_message"]["from"]["id"] = 1276618370  # the bot (getMe fixture)
    deliver(runtime, plain_chat, mention, reply)
    await telegram_worker(runtime, runner=echo_runner(seen)).drain()
    # Both reply to a story in the recorded payload: the model is told what they answer.
    assert [t.text for t in seen] == [
        "[In reply to Wert: (story)]\nwhat time is it?",
        "[In reply to your message: (story)]\nand tomorrow?",
    ]
    assert {(t.chat_id, t.user_id, t.chat_type) for t in seen} == {(str(group), str(USER), "supergroup")}
    assert len(bot.sent_to(group)) == 2


async def test_blocked_chat_is_marked_and_not_written_to(runtime, bot, env):
    bot.fail["sendMessage"] = [(403, load("error_403_bot_blocked_by_user.json"))]
    deliver(runtime, private_text(95, "hi"))
    await telegram_worker(runtime, runner=echo_runner()).drain()
    conn = connect(env)
    assert one(conn, "SELECT blocked_at FROM chats WHERE chat_id = ?", (str(USER),))["blocked_at"]
    assert inbox.get(conn, BOT_ID, 95)["status"] == "failed"
    conn.close()
    assert bot.sent_to(USER) == []


async def test_channel_posts_and_unknown_updates_are_stored_already_skipped(runtime, bot, env, caplog):
    with caplog.at_level("INFO", logger="ash.webhook"):
        assert not store_update(runtime, json.dumps(load("update_channel_post.json")).encode())  # nothing to wake for
        assert not store_update(runtime, json.dumps({"update_id": 5, "message": {"chat": "not an object"}}).encode())
    assert inbox_statuses(env) == {808628153: "skipped", 5: "skipped"}
    conn = connect(env)
    assert inbox.get(conn, BOT_ID, 808628153)["last_error"] == "not answered: channel_post"
    assert inbox.get(conn, BOT_ID, 5)["done_at"] is not None
    conn.close()
    assert "skipping update 808628153: channel_post (Ash does not answer channel posts)" in caplog.text
    assert "update 5 stored but not answered: it does not decode" in caplog.text
    await telegram_worker(runtime, runner=echo_runner()).drain()
    assert bot.messages == {}


async def test_pending_rows_of_unanswered_kinds_from_an_older_version_are_skipped(runtime, bot, env, caplog):
    # Before kinds were skipped at intake they were stored pending; the sweep finishes them.
    conn = connect(env)
    for update_id, kind in ((1, "channel_post"), (2, "unknown")):
        conn.execute(
            "INSERT INTO inbox (bot_id, update_id, chat_key, kind, payload, received_at) VALUES (?, ?, ?, ?, ?, ?)",
            (BOT_ID, update_id, "-100", kind, b"{}", "2026-01-01T00:00:00.000Z"),
        )
    conn.close()
    with caplog.at_level("INFO", logger="ash.inbox"):
        worker = telegram_worker(runtime, runner=echo_runner())
        await worker.sweep()
        await worker.drain()
    assert inbox_statuses(env) == {1: "skipped", 2: "skipped"}
    assert "skipped 2 update(s) Ash does not answer (channel_post, unknown)" in caplog.text
    assert bot.messages == {}


async def test_skipped_edits_do_not_hold_up_the_chats_next_message(runtime, bot, env):
    edited = {"update_id": 70, "edited_message": private_text(70, "typo fixed")["message"]}
    deliver(runtime, edited, private_text(71, "next question"))
    await telegram_worker(runtime, runner=echo_runner()).drain()
    assert inbox_statuses(env) == {70: "skipped", 71: "done"}
    assert [m["text"] for m in bot.sent_to(USER)] == ["You said: next question"]


async def test_prune_removes_old_finished_rows_only(runtime, env):
    deliver(runtime, private_text(1, "a"), private_text(2, "b"))
    conn = connect(env)
    conn.execute("UPDATE inbox SET status = 'done', done_at = '2000-01-01T00:00:00.000Z' WHERE update_id = 1")
    assert inbox.prune(conn, retention_days=7) == 1
    assert [r["update_id"] for r in rows(conn, "SELECT update_id FROM inbox")] == [2]
    conn.close()
