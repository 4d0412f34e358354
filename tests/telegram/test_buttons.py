"""Button presses: answered once, acted on once, never retried into a failure notice; and a 400
from Telegram is not retried anywhere. Recorded callback payloads through the real Telegram handler."""

from __future__ import annotations

from lib.db import connect, one
from lib.inbox import queue as inbox
from lib.telegram.updates import telegram_worker
from tests.support.database import inbox_statuses
from tests.support.telegram import BOT_ID, button_press, deliver, echo_runner, private_text
from tests.telegram.conftest import USER

NOT_FOUND = {"ok": False, "error_code": 400, "description": "Bad Request: message to edit not found"}


async def process(runtime, *updates: dict) -> None:
    deliver(runtime, *updates)
    await telegram_worker(runtime, runner=echo_runner()).drain()


def methods(bot, name: str) -> list[dict]:
    return [body for method, body in bot.calls if method == name]


async def forget_prompt(runtime, bot) -> dict:
    """Send /forget and return the bot's confirmation message as a callback carries it."""
    await process(runtime, private_text(100, "/forget"))
    message_id = max(bot.messages)
    shown = bot.messages[message_id]
    return {
        "message_id": message_id,
        "from": {"id": BOT_ID, "is_bot": True, "first_name": "Ash"},
        "chat": {"id": USER, "type": "private", "first_name": "Hirrolot"},
        "date": 1716906786,
        "text": shown["text"],
        "reply_markup": shown["reply_markup"],
    }


async def test_a_press_under_an_inaccessible_message_is_answered_once_and_shown_anew(runtime, bot, env):
    """Telegram sends a message it no longer lets the bot see with date 0; it cannot be edited."""
    inaccessible = {"chat": {"id": USER, "type": "private"}, "message_id": 60, "date": 0}
    await process(runtime, button_press(200, f"forget:no:{USER}", inaccessible, USER))
    assert [body["callback_query_id"] for body in methods(bot, "answerCallbackQuery")] == ["cb-200"]
    assert methods(bot, "editMessageText") == []
    assert [m["text"] for m in bot.sent_to(USER)] == ["Okay, I forgot nothing."]
    assert inbox_statuses(env) == {200: "done"}


async def test_an_edit_telegram_refuses_is_not_retried_and_the_press_not_answered_again(runtime, bot, env):
    prompt = await forget_prompt(runtime, bot)
    bot.fail["editMessageText"] = [(400, NOT_FOUND)]
    await process(runtime, button_press(201, f"forget:no:{USER}", prompt, USER))
    assert len(methods(bot, "answerCallbackQuery")) == 1
    assert len(methods(bot, "editMessageText")) == 1
    conn = connect(env)
    row = inbox.get(conn, BOT_ID, 201)
    conn.close()
    assert (row["status"], row["attempts"]) == ("done", 1)
    assert not any("could not answer" in m["text"] for m in bot.sent_to(USER))


async def test_cancel_pressed_twice_edits_once(runtime, bot):
    """A double tap sends both presses before the first edit removes the buttons."""
    prompt = await forget_prompt(runtime, bot)
    await process(
        runtime,
        button_press(202, f"forget:no:{USER}", prompt, USER),
        button_press(203, f"forget:no:{USER}", prompt, USER),
    )
    assert [body["text"] for body in methods(bot, "editMessageText")] == ["Okay, I forgot nothing."]
    toasts = [body.get("text") for body in methods(bot, "answerCallbackQuery")]
    assert toasts == ["Kept.", "Already done."]


async def test_forget_pressed_twice_forgets_once_and_keeps_its_count(runtime, bot, env):
    prompt = await forget_prompt(runtime, bot)
    await process(
        runtime,
        button_press(204, f"forget:yes:{USER}", prompt, USER),
        button_press(205, f"forget:yes:{USER}", prompt, USER),
    )
    [edit] = methods(bot, "editMessageText")
    assert edit["text"].startswith("Done: I forgot everything") and "(0 items" not in edit["text"]
    conn = connect(env)
    assert one(conn, "SELECT count(*) AS n FROM audit_log WHERE action LIKE '%forget%'")["n"] == 1
    conn.close()


async def test_a_press_on_a_message_already_showing_its_result_sends_no_edit(runtime, bot):
    prompt = await forget_prompt(runtime, bot)
    prompt["text"] = "Okay, I forgot nothing."
    del prompt["reply_markup"]  # what the first press's edit left: its result, and no buttons
    await process(runtime, button_press(206, f"forget:no:{USER}", prompt, USER))
    assert methods(bot, "editMessageText") == []


async def test_a_400_while_answering_a_message_fails_at_once(runtime, bot, env):
    """A request Telegram refuses fails again: one attempt, then one notice."""
    bot.fail["sendMessage"] = [(400, {"ok": False, "error_code": 400, "description": "Bad Request: chat not found"})]
    await process(runtime, private_text(300, "hello"))
    conn = connect(env)
    row = inbox.get(conn, BOT_ID, 300)
    conn.close()
    assert (row["status"], row["attempts"]) == ("failed", 1)
    assert [m["text"] for m in bot.sent_to(USER)] == [
        "Sorry, I could not answer this message (I tried once). Please send it again later."
    ]
