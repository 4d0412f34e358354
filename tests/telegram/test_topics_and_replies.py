"""Where answers land: the forum topic the question was asked in (messages, "typing…", "Stopped."
and failure notices alike), a reply to the question in groups, never a thread id outside forums.
Recorded payloads through the real Telegram handler and sink; the fake Bot API shows what Telegram got."""

from __future__ import annotations

import asyncio
import copy

from lib.agent import TurnResult
from lib.telegram.updates import telegram_worker
from tests.support.database import inbox_statuses
from tests.support.telegram import (
    deliver,
    echo_runner,
    forum_topic_text,
    load,
    make_runtime,
    person,
    private_text,
)
from tests.telegram.conftest import USER

ASKER = person(USER, "Hirrolot", "hirrolot")
TOPIC = 2391  # the recorded forum topic
FORUM = -1001971186208


def calls(bot, method: str) -> list[dict]:
    return [body for name, body in bot.calls if name == method]


async def answer(runtime, *updates: dict, runner=None) -> None:
    deliver(runtime, *updates)
    await telegram_worker(runtime, runner=runner or echo_runner()).drain()


async def test_a_reply_thread_in_an_ordinary_supergroup_gets_a_reply_not_a_thread_id(runtime, bot):
    """The recorded group message has message_thread_id (its reply thread) but is no forum topic."""
    update = load("update_message_supergroup_reply_to_message_bot_command.json")
    message = update["message"]
    message.update(text="@el_mon_test_bot what is a story?", entities=[{"offset": 0, "length": 16, "type": "mention"}])
    message["from"]["id"] = USER
    await answer(runtime, update)
    [sent] = calls(bot, "sendMessage")
    assert "message_thread_id" not in sent
    assert sent["reply_parameters"] == {"message_id": 134546, "allow_sending_without_reply": True}
    assert "message_thread_id" not in calls(bot, "sendChatAction")[0]


async def test_an_answer_in_a_forum_topic_stays_in_the_topic_and_replies_to_the_question(runtime, bot):
    long_answer = "\n\n".join(f"Part {i}. " + "text " * 200 for i in range(6))
    update = forum_topic_text(3000, "@el_mon_test_bot plan the trip", ASKER)
    await answer(runtime, update, runner=echo_runner(reply=lambda turn: long_answer))
    first, *rest = calls(bot, "sendMessage")
    assert first["message_thread_id"] == TOPIC
    assert first["reply_parameters"] == {"message_id": 3000, "allow_sending_without_reply": True}
    assert rest and all(part["message_thread_id"] == TOPIC and "reply_parameters" not in part for part in rest)
    assert {action["message_thread_id"] for action in calls(bot, "sendChatAction")} == {TOPIC}


async def test_the_general_topic_of_a_forum_gets_no_thread_id(runtime, bot):
    update = forum_topic_text(3001, "@el_mon_test_bot hello", ASKER)
    message = update["message"]
    for field in ("message_thread_id", "is_topic_message", "reply_to_message"):
        del message[field]
    await answer(runtime, update)
    [sent] = calls(bot, "sendMessage")
    assert "message_thread_id" not in sent and sent["reply_parameters"]["message_id"] == 3001


async def test_a_private_chat_with_topics_keeps_the_topic_when_the_bot_has_topic_mode(runtime, bot):
    update = private_text(3002, "hello from a topic")
    update["message"].update(message_thread_id=77, is_topic_message=True)
    bot.me = copy.deepcopy(bot.me)
    bot.me["result"]["has_topics_enabled"] = True
    await answer(runtime, update)
    [sent] = calls(bot, "sendMessage")
    assert sent["message_thread_id"] == 77 and "reply_parameters" not in sent
    assert calls(bot, "sendChatAction")[0]["message_thread_id"] == 77


async def test_a_thread_id_in_a_private_chat_is_used_only_with_topic_mode_on(runtime, bot):
    update = private_text(3003, "hello")
    update["message"].update(message_thread_id=77, is_topic_message=True)
    await answer(runtime, update)  # getMe (recorded) has no has_topics_enabled
    [sent] = calls(bot, "sendMessage")
    assert "message_thread_id" not in sent and "reply_parameters" not in sent


async def test_topic_mode_switched_on_later_is_seen_once_getme_is_asked_again(runtime, bot, monkeypatch):
    import lib.telegram.bot

    monkeypatch.setattr(lib.telegram.bot, "ME_TTL", 0.0)  # every turn asks getMe anew
    worker = telegram_worker(runtime, runner=echo_runner())
    for update_id in (3005, 3006):
        update = private_text(update_id, "hello")
        update["message"].update(message_thread_id=77, is_topic_message=True)
        deliver(runtime, update)
        await worker.drain()
        bot.me = copy.deepcopy(bot.me)
        bot.me["result"]["has_topics_enabled"] = True  # the owner turns topic mode on in @BotFather
    before, after = calls(bot, "sendMessage")
    assert "message_thread_id" not in before and after["message_thread_id"] == 77


async def test_a_channels_direct_messages_topic_is_named_in_the_answer(runtime, bot):
    update = forum_topic_text(3004, "@el_mon_test_bot what are your hours?", ASKER)
    message = update["message"]
    for field in ("message_thread_id", "is_topic_message", "reply_to_message"):
        del message[field]
    message["chat"] = {"id": -1002000000001, "type": "supergroup", "title": "News DMs", "is_direct_messages": True}
    message["direct_messages_topic"] = {"topic_id": 555, "user": ASKER}
    await answer(runtime, update)
    [sent] = calls(bot, "sendMessage")
    assert sent["direct_messages_topic_id"] == 555


async def test_a_command_in_a_topic_is_answered_in_the_topic(runtime, bot):
    await answer(runtime, forum_topic_text(3007, "/help", ASKER))
    [sent] = calls(bot, "sendMessage")
    assert sent["message_thread_id"] == TOPIC and sent["reply_parameters"]["message_id"] == 3007
    assert "/new" in sent["text"]


async def test_stop_in_a_topic_settles_the_partial_answer_and_says_so_in_the_topic(runtime, bot, env):
    started = asyncio.Event()

    async def endless(turn, sink):
        await sink.update("Here is the first half of")
        started.set()
        await asyncio.sleep(60)
        return TurnResult("never")

    worker = telegram_worker(runtime, runner=endless)
    deliver(runtime, forum_topic_text(3010, "@el_mon_test_bot write a long story", ASKER))
    task = asyncio.create_task(worker.drain())
    await asyncio.wait_for(started.wait(), 5)
    deliver(runtime, forum_topic_text(3011, "/stop", ASKER))
    await worker.pump()
    await asyncio.wait_for(task, 5)
    partial, stopped = bot.sent_to(FORUM)
    assert partial["text"] == "Here is the first half of\n\n<i>(stopped)</i>"  # no " …" left behind
    assert stopped["text"] == "Stopped."
    assert stopped["message_thread_id"] == TOPIC and stopped["reply_parameters"]["message_id"] == 3010
    assert inbox_statuses(env) == {3010: "done", 3011: "done"}


async def test_the_failure_notice_lands_in_the_topic(runtime, bot, env, ash_home):
    async def broken(turn, sink):
        raise RuntimeError("model exploded")

    ash_home.joinpath("config.toml").write_text(f"[telegram]\nallowed_users = [{USER}]\nmax_attempts = 1\n")
    one_try = make_runtime(runtime.http)
    deliver(one_try, forum_topic_text(3020, "@el_mon_test_bot hi", ASKER))
    await telegram_worker(one_try, runner=broken).drain()
    [notice] = calls(bot, "sendMessage")
    assert "could not answer" in notice["text"] and "I tried once" in notice["text"]
    assert notice["message_thread_id"] == TOPIC and notice["reply_parameters"]["message_id"] == 3020
    assert inbox_statuses(env) == {3020: "failed"}


async def test_private_answers_are_no_replies(runtime, bot):
    await answer(runtime, private_text(3030, "hello"))
    [sent] = calls(bot, "sendMessage")
    assert "reply_parameters" not in sent and "message_thread_id" not in sent
