"""/why end to end: the real inbox worker and Telegram handler against the fake Bot API, real
agent turns over a real SQLite file, the model stubbed at the network edge (httpx2_mock).

What an answer drew on is what its model request held; /why lists exactly that; Forget takes the
fact out of the next prompt; Wrong plus a correction supersedes it; in a group /why answers in
private and the answer carries no 🧠 button, while a private answer does."""

from __future__ import annotations

import httpx
import pytest

from lib.db import connect
from lib.memory import knowledge, provenance, store
from lib.telegram.approvals import run_agent_turn
from lib.telegram.updates import telegram_worker
from tests.support.agent import ANTHROPIC_MESSAGES, request_json, set_keys, sse_response
from tests.support.telegram import (
    GROUP,
    button_press,
    buttons,
    deliver,
    group_text,
    make_runtime,
    point_at_fake_bot_api,
    private_text,
    replying_to,
)

pytestmark = pytest.mark.usefixtures("sleeps")

ALICE = 408258968
BOT = "el_mon_test_bot"
CONFIG = f"""owner = {ALICE}
[embeddings]
provider = "none"
[memory]
extraction_enabled = false
"""
PRIVATE = {"id": ALICE, "type": "private", "first_name": "Alice"}


@pytest.fixture
def bot():
    import respx

    from tests.support.telegram import FakeBotAPI

    with respx.mock(assert_all_called=False) as router:
        yield FakeBotAPI(router)


@pytest.fixture
def setup(ash_home, db_path, monkeypatch, bot, settings):
    point_at_fake_bot_api(monkeypatch, ash_home, CONFIG)
    set_keys(monkeypatch, openai=False)
    from lib.config import load_settings

    settings = load_settings()
    conn = connect(settings.database_path)
    ids = {
        "porto": knowledge.add(conn, settings, "Alice's sister Marta lives in Porto", owner_user_id=str(ALICE)),
        "cat": knowledge.add(conn, settings, "Alice's cat is called Miso", owner_user_id=str(ALICE)),
    }
    store.set_notes(conn, str(ALICE), "- Alice is vegetarian.")
    conn.close()
    return ids


def model(httpx2_mock):
    return httpx2_mock.post(ANTHROPIC_MESSAGES).mock(side_effect=lambda _: sse_response("anthropic", "stream_text.sse"))


def system_of(call) -> str:
    return request_json(call)["system"]


def answers(bot, chat) -> list[dict]:
    return [m for m in bot.sent_to(chat) if "drew on" not in m["text"]]


def last_sent(bot) -> dict:
    return bot.messages[max(bot.messages)]


def message_for(bot, message_id: int, chat: dict) -> dict:
    shown = bot.messages[message_id]
    return {
        "message_id": message_id,
        "from": {"id": 1, "is_bot": True, "first_name": "Ash"},
        "chat": chat,
        "date": 1716906786,
        "text": shown["text"],
        "reply_markup": shown["reply_markup"],
    }


async def test_why_lists_what_the_prompt_held_and_forget_and_wrong_change_the_next_prompt(setup, bot, httpx2_mock):
    route = model(httpx2_mock)
    async with httpx.AsyncClient() as http:
        runtime = make_runtime(http)
        worker = telegram_worker(runtime, runner=lambda turn, sink: run_agent_turn(runtime, turn, sink))
        conn = runtime.db.conn()

        deliver(runtime, private_text(1, "Where does my sister Marta live, and what is my cat called?", ALICE))
        await worker.drain()
        system = system_of(route.calls[-1])
        [answer] = answers(bot, ALICE)
        # The provenance matches the recorded model request: each recorded item is in the prompt...
        recorded = provenance.find(conn, provider="telegram", chat_id=str(ALICE), user_id=str(ALICE))
        items = provenance.sources(conn, recorded.id)
        for item in items:
            if item.kind == "knowledge":
                assert knowledge.get(conn, item.ref_id).content in system
            elif item.kind == "message":
                assert conn.execute("SELECT content FROM messages WHERE id = ?", (item.ref_id,)).fetchone()[0] in system
        kinds = sorted((i.kind, i.ref_id) for i in items)
        assert kinds == sorted([("knowledge", setup["porto"]), ("knowledge", setup["cat"]), ("note", None)])
        # ...and each memory the prompt holds is recorded (no more, no less).
        assert system.count("<item ") == 2 and "Alice is vegetarian." in system
        # A private answer that drew on memory carries the 🧠 button with the count.
        assert buttons(answer) == [("🧠 3", f"why:o:{recorded.id}")]

        deliver(runtime, private_text(2, "/why", ALICE))
        await worker.drain()
        listing = last_sent(bot)
        assert "drew on 3 things" in listing["text"]
        assert (
            "Marta lives in Porto" in listing["text"] and "Miso" in listing["text"] and "vegetarian" in listing["text"]
        )
        labels = [label for label, _ in buttons(listing)]
        assert labels == ["Forget 1", "Wrong 1", "Forget 2", "Wrong 2", "Forget 3", "Wrong 3"]
        listing_id = max(bot.messages)

        # Forget the Porto fact from the list: gone from the database and from the next prompt.
        porto_button = next(data for label, data in buttons(listing) if label == f"Forget {_number(listing, 'Porto')}")
        deliver(runtime, button_press(3, porto_button, message_for(bot, listing_id, PRIVATE), presser=ALICE))
        await worker.drain()
        assert knowledge.get(conn, setup["porto"]) is None
        assert "forgotten since" in bot.messages[listing_id]["text"]
        # The same press again changes nothing.
        deliver(runtime, button_press(4, porto_button, message_for(bot, listing_id, PRIVATE), presser=ALICE))
        await worker.drain()
        assert ("answerCallbackQuery", "That is already gone.") in [(m, b.get("text")) for m, b in bot.calls]

        # Wrong on the cat: Ash asks, the next message is the correction.
        cat_button = next(
            data for label, data in buttons(bot.messages[listing_id]) if label == f"Wrong {_number(listing, 'Miso')}"
        )
        deliver(runtime, button_press(5, cat_button, message_for(bot, listing_id, PRIVATE), presser=ALICE))
        await worker.drain()
        assert "What is right instead of “Alice's cat is called Miso”?" in last_sent(bot)["text"]
        calls_before = len(route.calls)
        deliver(runtime, private_text(6, "Alice's cat is called Tofu", ALICE))
        await worker.drain()
        assert "Thanks, corrected" in last_sent(bot)["text"]
        assert len(route.calls) == calls_before  # a correction is not a question for the model
        old = knowledge.get(conn, setup["cat"])
        assert old.superseded_by is not None
        assert knowledge.get(conn, old.superseded_by).content == "Alice's cat is called Tofu"
        trail = conn.execute(
            "SELECT actor, action FROM audit_log WHERE action IN ('forget_memory', 'memory_supersede', 'memory_add') "
            "AND actor LIKE 'telegram:%' ORDER BY id"
        ).fetchall()
        assert trail == [
            (f"telegram:{ALICE}:why", "forget_memory"),
            (f"telegram:{ALICE}:why", "memory_add"),
            (f"telegram:{ALICE}:why", "memory_supersede"),
        ]

        # Each name is a rare word (the relevance floor's test), so each entry would be found if active.
        deliver(runtime, private_text(7, "Tofu, Miso, Porto: what do you know about these?", ALICE))
        await worker.drain()
        system = system_of(route.calls[-1])
        assert "Porto" not in system and "Miso" not in system and "Tofu" in system

        # /why in reply to the first answer still explains that one (its record is kept).
        first = message_for(bot, min(m for m in bot.messages if bot.messages[m] is answer), PRIVATE)
        deliver(runtime, replying_to(private_text(8, "/why", ALICE), first))
        await worker.drain()
        assert "forgotten since" in last_sent(bot)["text"] and "replaced since" in last_sent(bot)["text"]
        runtime.db.close()


def _number(listing: dict, word: str) -> int:
    """The list number of the line that mentions `word`."""
    for line in listing["text"].splitlines():
        if word in line and line[:1].isdigit():
            return int(line.split(".", 1)[0])
    raise AssertionError(f"{word} not listed")


async def test_in_a_group_why_answers_privately_and_answers_carry_no_button(setup, bot, httpx2_mock, settings):
    model(httpx2_mock)
    async with httpx.AsyncClient() as http:
        runtime = make_runtime(http)
        conn = runtime.db.conn()
        knowledge.add(conn, runtime.settings, "The family picnic is at Monsanto park", owner_user_id=f"chat:{GROUP}")
        worker = telegram_worker(runtime, runner=lambda turn, sink: run_agent_turn(runtime, turn, sink))
        deliver(runtime, group_text(1, f"@{BOT} where is the family picnic?", ALICE))
        await worker.drain()
        [answer] = bot.sent_to(GROUP)
        assert buttons(answer) == []  # the 🧠 button is off in groups by default

        deliver(runtime, group_text(2, "/why", ALICE))
        await worker.drain()
        in_group = [m["text"] for m in bot.sent_to(GROUP)]
        assert in_group[-1] == "I've answered you in our private chat."
        assert not any("Monsanto" in text for text in in_group[1:])
        private = bot.sent_to(ALICE)[-1]
        assert "Monsanto park" in private["text"] and buttons(private)
        runtime.db.close()
