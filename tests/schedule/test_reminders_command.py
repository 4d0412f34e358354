"""/reminders in Telegram: the chat's tasks with a cancel button each; a press is checked against the
stored task (its chat, its state, who presses). Through the real Telegram handler, a real SQLite file and
the fake Bot API; also `ash chat`, which answers the same command."""

from __future__ import annotations

from lib.conversation.commands import Ask, run_command
from lib.conversation.replies import Asker
from lib.db import connect
from lib.schedule import store
from lib.telegram.updates import telegram_worker
from tests.schedule.conftest import MEMBER, OWNER, add_job
from tests.support.telegram import (
    GROUP,
    as_shown,
    button_press,
    buttons,
    deliver,
    echo_runner,
    group_text,
    private_text,
)

PRIVATE = {"id": OWNER, "type": "private", "first_name": "Hirrolot"}
FAMILY = {"id": GROUP, "type": "supergroup", "title": "Family"}


async def process(runtime, *updates: dict) -> None:
    deliver(runtime, *updates)
    await telegram_worker(runtime, runner=echo_runner()).drain()


def toasts(bot) -> list[str | None]:
    return [body.get("text") for method, body in bot.calls if method == "answerCallbackQuery"]


def status(runtime, job_id: int) -> str:
    conn = connect(runtime.settings.database_path)
    try:
        return store.get(conn, job_id).status
    finally:
        conn.close()


async def test_reminders_lists_the_chats_tasks_and_a_press_cancels_one_once(runtime, clock, bot):
    water = add_job(runtime, clock(), every="2 hours", text="drink water")
    call = add_job(runtime, clock(), at="in 30 minutes", text="call Ana")
    add_job(runtime, clock(), at="in 1 hour", text="not this chat", user=MEMBER, chat=MEMBER)

    await process(runtime, private_text(500, "/reminders"))

    [listing] = bot.sent_to(OWNER)
    assert listing["text"].startswith("Scheduled in this chat:\n")
    assert f'#{call.id} once, sends "call Ana"; next: ' in listing["text"]
    assert f'#{water.id} every 2 hours, sends "drink water"' in listing["text"]
    assert "not this chat" not in listing["text"]
    assert buttons(listing) == [
        (f"Cancel #{call.id}", f"reminders:cancel:{call.id}"),
        (f"Cancel #{water.id}", f"reminders:cancel:{water.id}"),
    ]

    shown = as_shown(bot, PRIVATE)
    data = f"reminders:cancel:{water.id}"
    await process(runtime, button_press(501, data, shown, OWNER), button_press(502, data, shown, OWNER))

    # The double tap's second press finds the task ended and changes nothing.
    assert toasts(bot) == ["Cancelled.", "That task has already ended or been cancelled."]
    [edit] = [body for method, body in bot.calls if method == "editMessageText"]
    assert edit["text"].startswith(f'Cancelled #{water.id}, which sends "drink water".\n\nStill scheduled here:\n')
    assert f'#{call.id} once, sends "call Ana"' in edit["text"] and 'drink water"' not in edit["text"].split("\n", 1)[1]
    # The others keep their buttons: cancelling one leaves the rest cancellable.
    assert [(b["text"], b["callback_data"]) for row in edit["reply_markup"]["inline_keyboard"] for b in row] == [
        (f"Cancel #{call.id}", f"reminders:cancel:{call.id}")
    ]
    assert (status(runtime, water.id), status(runtime, call.id)) == ("cancelled", "active")

    shown = as_shown(bot, PRIVATE)  # the list as the edit left it
    await process(runtime, button_press(503, f"reminders:cancel:{call.id}", shown, OWNER))
    last = [body for method, body in bot.calls if method == "editMessageText"][-1]
    assert last["text"] == f'Cancelled #{call.id}, which sends "call Ana". Nothing else is scheduled here.'
    assert "reply_markup" not in last


async def test_in_a_group_only_the_maker_or_the_owner_cancels_with_a_button(runtime, clock, bot):
    owners = add_job(runtime, clock(), every="1 day", text="owner's", chat=GROUP, chat_type="supergroup")
    members = add_job(runtime, clock(), every="1 day", text="member's", user=MEMBER, chat=GROUP, chat_type="supergroup")

    await process(runtime, group_text(510, "/reminders", MEMBER))
    [listing] = bot.sent_to(GROUP)
    assert "(set by " in listing["text"] and listing["text"].endswith(
        "Only the person who set a task, or the owner, can cancel it."
    )
    shown = as_shown(bot, FAMILY)

    await process(runtime, button_press(511, f"reminders:cancel:{owners.id}", shown, MEMBER))
    assert toasts(bot) == ["Only the person who set this task, or the owner, can cancel it."]
    assert status(runtime, owners.id) == "active"

    await process(runtime, button_press(512, f"reminders:cancel:{members.id}", as_shown(bot, FAMILY), OWNER))
    assert toasts(bot)[-1] == "Cancelled."
    assert status(runtime, members.id) == "cancelled"


async def test_a_press_for_another_chats_task_or_an_ended_one_changes_nothing(runtime, clock, bot):
    elsewhere = add_job(runtime, clock(), every="1 day", text="group's", chat=GROUP, chat_type="supergroup")
    ended = add_job(runtime, clock(), every="1 day", text="ended")
    conn = connect(runtime.settings.database_path)
    store.cancel(conn, ended.id, "test", clock())
    conn.close()
    await process(runtime, private_text(520, "/reminders"))
    shown = as_shown(bot, PRIVATE)

    await process(
        runtime,
        button_press(521, f"reminders:cancel:{elsewhere.id}", shown, OWNER),
        button_press(522, f"reminders:cancel:{ended.id}", shown, OWNER),
    )

    assert toasts(bot) == ["That task is not in this chat.", "That task has already ended or been cancelled."]
    assert status(runtime, elsewhere.id) == "active"
    assert [method for method, _ in bot.calls if method == "editMessageText"] == []


async def test_an_empty_chat_says_how_to_make_one(runtime, bot):
    await process(runtime, private_text(530, "/reminders"))
    [answer] = bot.sent_to(OWNER)
    assert answer["text"].startswith("There are no reminders or scheduled tasks in this chat.")
    assert buttons(answer) == []


async def test_ash_chat_lists_the_tasks_of_the_persons_private_telegram_chat(runtime, clock):
    job = add_job(runtime, clock(), at="in 1 hour", text="from the terminal")
    conn = connect(runtime.settings.database_path)
    try:
        reply = run_command(Ask(conn, runtime.settings, Asker("cli", "cli", str(OWNER))), "reminders")
    finally:
        conn.close()
    assert f'#{job.id} once, sends "from the terminal"' in reply.text
    assert reply.choices[0].data == f"reminders:cancel:{job.id}"
