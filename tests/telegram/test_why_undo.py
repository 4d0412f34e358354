"""The Undo button under a /why correction's confirmation (lib/conversation/why.py, lib/memory/undo.py):
through the real inbox worker and Telegram adapter, the corrected fact is current again, the
correction gone, the next prompt says so, and only the person who corrected may press it."""

from __future__ import annotations

import httpx
import pytest

from lib.conversation.commands import run_press
from lib.conversation.replies import Asker
from lib.memory import audit, knowledge
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


async def test_undo_under_a_correction_brings_the_old_fact_back(setup, bot, httpx2_mock):  # noqa: F811
    route = model(httpx2_mock)
    async with httpx.AsyncClient() as http:
        runtime = make_runtime(http)
        worker = telegram_worker(runtime, runner=lambda turn, sink: run_agent_turn(runtime, turn, sink))
        conn = runtime.db.conn()
        deliver(runtime, private_text(1, "Where does my sister Marta live, and what is my cat called?", ALICE))
        await worker.drain()
        deliver(runtime, private_text(2, "/why", ALICE))
        await worker.drain()
        listing = last_sent(bot)
        listing_id = max(bot.messages)
        wrong = dict(buttons(listing))[f"Wrong {_number(listing, 'Miso')}"]
        deliver(runtime, button_press(3, wrong, message_for(bot, listing_id, PRIVATE), presser=ALICE))
        await worker.drain()
        deliver(runtime, private_text(4, "Alice's cat is called Tofu", ALICE))
        await worker.drain()
        confirmation = last_sent(bot)
        confirmation_id = max(bot.messages)
        assert "Thanks, corrected" in confirmation["text"]
        [(label, undo_data)] = buttons(confirmation)
        assert label == "Undo"
        new_id = knowledge.get(conn, setup["cat"]).superseded_by

        # Someone else's press changes nothing.
        other = run_press(conn, runtime.settings, Asker("telegram", "5", "5"), undo_data)
        assert other.notice.startswith("Only the person who asked")
        assert knowledge.get(conn, setup["cat"]).superseded_by == new_id

        deliver(runtime, button_press(5, undo_data, message_for(bot, confirmation_id, PRIVATE), presser=ALICE))
        await worker.drain()
        assert knowledge.get(conn, setup["cat"]).active and knowledge.get(conn, new_id) is None
        assert bot.messages[confirmation_id]["text"].startswith("Undone")
        assert "memory_undo" in [e.action for e in audit.history(conn, setup["cat"])]
        # Pressed again: undone already, nothing changes.
        deliver(runtime, button_press(6, undo_data, message_for(bot, confirmation_id, PRIVATE), presser=ALICE))
        await worker.drain()
        assert knowledge.get(conn, setup["cat"]).active

        deliver(runtime, private_text(7, "Tofu or Miso: what is my cat called?", ALICE))
        await worker.drain()
        system = system_of(route.calls[-1])
        assert "Miso" in system and "Tofu" not in system
        runtime.db.close()
