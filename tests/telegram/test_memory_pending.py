"""/memory pending end to end: the real inbox worker and Telegram adapter against the fake Bot API,
real agent turns over a real SQLite file, the model stubbed at the network edge.

A pending entry is absent from the prompt, listed with Keep and Discard, present in the next
prompt once kept; Discard keeps it out; a second press changes nothing; in a group only the
owner reviews, in private; nobody else's press counts."""

from __future__ import annotations

import httpx
import pytest

from lib.conversation.commands import Ask, run_command, run_press
from lib.conversation.replies import Asker
from lib.db import connect
from lib.memory import knowledge
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
)
from tests.telegram.test_why import ALICE, CONFIG, PRIVATE, bot, message_for  # noqa: F401

pytestmark = pytest.mark.usefixtures("sleeps")
BOB = 777000111


@pytest.fixture
def setup(ash_home, db_path, monkeypatch, bot, settings):  # noqa: F811
    point_at_fake_bot_api(monkeypatch, ash_home, CONFIG)
    set_keys(monkeypatch, openai=False)
    from lib.config import load_settings

    settings = load_settings()
    conn = connect(settings.database_path)
    pending = dict(source="tool", status="pending", actor="test")
    ids = {
        "teal": knowledge.add(
            conn, settings, "Tom's favourite colour is teal", owner_user_id=str(ALICE), origin="web", **pending
        ),
        "picnic": knowledge.add(
            conn, settings, "The picnic moved to Belem", owner_user_id=f"chat:{GROUP}", origin="member:Bob", **pending
        ),
    }
    conn.close()
    return ids, settings


async def test_keep_and_discard_from_memory_pending_change_the_next_prompt(setup, bot, httpx2_mock):  # noqa: F811
    ids, _ = setup
    route = httpx2_mock.post(ANTHROPIC_MESSAGES).mock(
        side_effect=lambda _: sse_response("anthropic", "stream_text.sse")
    )
    async with httpx.AsyncClient() as http:
        runtime = make_runtime(http)
        worker = telegram_worker(runtime, runner=lambda turn, sink: run_agent_turn(runtime, turn, sink))
        conn = runtime.db.conn()

        deliver(runtime, private_text(1, "What is Tom's favourite colour?", ALICE))
        await worker.drain()
        assert "teal" not in str(request_json(route.calls[-1]))

        deliver(runtime, private_text(2, "/memory pending", ALICE))
        await worker.drain()
        listing = bot.sent_to(ALICE)[-1]
        assert "2 memories wait for your review" in listing["text"]
        assert "from web" in listing["text"] and "from member:Bob in a group" in listing["text"]
        labels = dict(buttons(listing))
        assert set(labels) == {"Keep 1", "Discard 1", "Keep 2", "Discard 2"}
        listing_id = max(bot.messages)

        deliver(runtime, button_press(3, labels["Keep 1"], message_for(bot, listing_id, PRIVATE), presser=ALICE))
        await worker.drain()
        assert knowledge.get(conn, ids["teal"]).status == "active"
        deliver(runtime, button_press(4, labels["Discard 2"], message_for(bot, listing_id, PRIVATE), presser=ALICE))
        await worker.drain()
        assert knowledge.get(conn, ids["picnic"]).status == "discarded"
        # The list is redrawn in place: nothing left.
        assert bot.messages[listing_id]["text"] == "Nothing waits for your review."
        # An old button pressed again changes nothing.
        deliver(runtime, button_press(5, labels["Keep 2"], message_for(bot, listing_id, PRIVATE), presser=ALICE))
        await worker.drain()
        assert knowledge.get(conn, ids["picnic"]).status == "discarded"

        deliver(runtime, private_text(6, "What is Tom's favourite colour?", ALICE))
        await worker.drain()
        assert "teal" in str(request_json(route.calls[-1]))
        runtime.db.close()


async def test_in_a_group_only_the_owner_reviews_and_is_answered_privately(setup, bot, httpx2_mock):  # noqa: F811
    ids, settings = setup
    async with httpx.AsyncClient() as http:
        runtime = make_runtime(http)
        worker = telegram_worker(runtime, runner=lambda turn, sink: run_agent_turn(runtime, turn, sink))
        deliver(runtime, group_text(1, "/memory pending", ALICE))
        await worker.drain()
        assert bot.sent_to(GROUP)[-1]["text"] == "I've answered you in our private chat."
        private = bot.sent_to(ALICE)[-1]
        assert "The picnic moved to Belem" in private["text"] and buttons(private)
        assert not any("Belem" in m["text"] for m in bot.sent_to(GROUP))

        conn = runtime.db.conn()
        bob_in_group = Asker("telegram", str(GROUP), str(BOB), "supergroup")
        said = run_command(Ask(conn, settings, bob_in_group, "pending"), "memory")
        assert said.text.startswith("Only the owner") and not said.buttons
        # Bob presses the owner's Keep: refused, nothing changes.
        keep = dict(buttons(private))["Keep 2"]
        refused = run_press(conn, settings, Asker("telegram", str(BOB), str(BOB)), keep)
        assert refused.notice == "This memory is not yours to review."
        assert knowledge.get(conn, ids["picnic"]).status == "pending"
        runtime.db.close()


def test_duplicate_facts_are_offered_for_merging_under_memory_pending(ash_home, db_path, settings):
    from lib.memory import consolidate

    conn = connect(settings.database_path)
    owner = "1001"
    keep = knowledge.add(conn, settings, "Likes green tea in the morning", owner_user_id=owner, source="cli")
    again = knowledge.add(conn, settings, "likes green tea in the morning!", owner_user_id=owner, source="cli")
    assert consolidate.propose(conn, settings)["proposed"] == 1
    me = Asker("telegram", owner, owner)
    shown = run_command(Ask(conn, settings, me, "pending"), "memory")
    assert "the same fact said twice" in shown.text
    labels = {b.label: b.data for b in shown.choices}
    assert set(labels) == {"Merge M1", "Keep both M1"}
    # Someone else cannot merge it; its owner can, once.
    assert run_press(conn, settings, Asker("telegram", "2002", "2002"), labels["Merge M1"]).notice == (
        "That one was decided already."
    )
    assert knowledge.get(conn, again).active
    merged = run_press(conn, settings, me, labels["Merge M1"])
    assert merged.notice == "Merged." and merged.reply.text == "Nothing waits for your review."
    assert knowledge.get(conn, again).superseded_by == keep
    assert run_press(conn, settings, me, labels["Merge M1"]).notice == "That one was decided already."


def test_contradicted_and_stale_facts_are_offered_with_apply_and_skip(ash_home, db_path, settings):
    from lib.memory import consolidate

    conn = connect(settings.database_path)
    owner = "1001"
    add = lambda text: knowledge.add(conn, settings, text, owner_user_id=owner, source="cli")  # noqa: E731
    lyon, porto, trip = add("Lives in Lyon"), add("Lives in Porto"), add("Flies to Tokyo on 14 February")
    consolidate.add_proposal(conn, settings, "supersede", owner=owner, keep=porto, drop=lyon)
    consolidate.add_proposal(conn, settings, "expire", owner=owner, drop=trip)
    me = Asker("telegram", owner, owner)
    shown = run_command(Ask(conn, settings, me, "pending"), "memory")
    assert "M1. contradicted: the newer fact replaces the older" in shown.text
    assert f"keep #{porto}: Lives in Porto" in shown.text and f"drop #{lyon}: Lives in Lyon" in shown.text
    assert "M2. stale" in shown.text and f"expire #{trip}: Flies to Tokyo on 14 February" in shown.text
    labels = {b.label: b.data for b in shown.choices}
    assert set(labels) == {"Apply M1", "Skip M1", "Apply M2", "Skip M2"}
    assert run_press(conn, settings, Asker("telegram", "2002", "2002"), labels["Apply M2"]).notice == (
        "That one was decided already."
    )

    applied = run_press(conn, settings, me, labels["Apply M1"])
    assert applied.notice == "Applied." and knowledge.get(conn, lyon).superseded_by == porto
    assert {b.label for b in applied.reply.choices} == {"Apply M1", "Skip M1"}  # the expiry still waits
    skipped = run_press(conn, settings, me, labels["Skip M2"])
    assert skipped.notice == "Skipped." and skipped.reply.text == "Nothing waits for your review."
    assert [k.id for k in knowledge.active_facts(conn, owner)] == [porto, trip]
