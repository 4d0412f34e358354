"""The Undo button under /why's Forget confirmation (lib/conversation/why.py, lib/memory/holds.py):
through the real inbox worker and Telegram adapter, a forgotten entry is out of the next prompt,
back in the one after Undo, only the person who forgot may press it, and once."""

from __future__ import annotations

import httpx
import pytest

from lib.conversation.commands import run_press
from lib.conversation.replies import Asker
from lib.memory import knowledge
from lib.telegram.approvals import run_agent_turn
from lib.telegram.updates import telegram_worker
from tests.support.telegram import button_press, buttons, deliver, make_runtime, private_text
from tests.telegram.test_why import (  # noqa: F401
    ALICE,
    PRIVATE,
    _number,
    bot,
    last_sent,
    message_for,
    model,
    setup,
    system_of,
)

pytestmark = pytest.mark.usefixtures("sleeps")


async def test_undo_under_a_forget_brings_the_entry_back(setup, bot, httpx2_mock):  # noqa: F811
    route = model(httpx2_mock)
    async with httpx.AsyncClient() as http:
        runtime = make_runtime(http)
        worker = telegram_worker(runtime, runner=lambda turn, sink: run_agent_turn(runtime, turn, sink))
        conn = runtime.db.conn()
        deliver(runtime, private_text(1, "Where does my sister Marta live, and what is my cat called?", ALICE))
        await worker.drain()
        deliver(runtime, private_text(2, "/why", ALICE))
        await worker.drain()
        listing, listing_id = last_sent(bot), max(bot.messages)
        forget = dict(buttons(listing))[f"Forget {_number(listing, 'Miso')}"]
        deliver(runtime, button_press(3, forget, message_for(bot, listing_id, PRIVATE), presser=ALICE))
        await worker.drain()
        assert knowledge.get(conn, setup["cat"]) is None
        confirmation, confirmation_id = last_sent(bot), max(bot.messages)
        assert confirmation_id != listing_id and confirmation["text"].startswith("Forgotten")
        [(label, undo_data)] = buttons(confirmation)
        assert label == "Undo"

        deliver(runtime, private_text(4, "What is my cat called?", ALICE))
        await worker.drain()
        assert "Miso" not in system_of(route.calls[-1])

        # Someone else's press changes nothing.
        other = run_press(conn, runtime.settings, Asker("telegram", "5", "5"), undo_data)
        assert other.notice.startswith("Only the person who asked")
        assert knowledge.get(conn, setup["cat"]) is None

        deliver(runtime, button_press(5, undo_data, message_for(bot, confirmation_id, PRIVATE), presser=ALICE))
        await worker.drain()
        assert knowledge.get(conn, setup["cat"]).active
        assert bot.messages[confirmation_id]["text"].startswith("Undone")
        deliver(runtime, button_press(6, undo_data, message_for(bot, confirmation_id, PRIVATE), presser=ALICE))
        await worker.drain()
        assert knowledge.get(conn, setup["cat"]).active

        deliver(runtime, private_text(7, "What is my cat called, Miso?", ALICE))
        await worker.drain()
        assert "Miso" in system_of(route.calls[-1])
        runtime.db.close()
