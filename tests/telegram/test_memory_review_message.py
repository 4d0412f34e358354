"""Consolidation's daily pass at the owner's quiet hour, and the review message Ash sends by itself
(lib/memory/daily.py, lib/memory/service.py, lib/telegram/review_message.py): the real memory
service, inbox worker and Telegram adapter against the fake Bot API, over a real SQLite file,
with an injected clock."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest

from lib.db import connect
from lib.memory import daily, knowledge, store
from lib.memory.service import MemoryService
from lib.telegram.review_message import queue_reviews
from lib.telegram.updates import telegram_worker
from tests.support.telegram import button_press, buttons, make_runtime, point_at_fake_bot_api
from tests.telegram.test_why import ALICE, CONFIG, PRIVATE, bot, message_for  # noqa: F401

OWNER = str(ALICE)
# 04:30 in Lisbon (UTC+0 in winter) and 13:30 in Tokyo; 10:00 in Lisbon.
QUIET_HOUR_UTC = datetime(2026, 11, 27, 4, 30, tzinfo=UTC).timestamp()
MORNING_UTC = datetime(2026, 11, 27, 10, 0, tzinfo=UTC).timestamp()
HOUR = 3600.0


async def no_model(**_) -> str:
    raise AssertionError("the deterministic checks need no model")


@pytest.fixture
def settings(ash_home, db_path, monkeypatch, bot):  # noqa: F811
    # The duplicate checks only: these tests are about when the pass runs and what it announces.
    point_at_fake_bot_api(
        monkeypatch, ash_home, 'timezone = "Europe/Lisbon"\n' + CONFIG + "consolidate_daily_tokens = 0\n"
    )
    from lib.config import load_settings

    return load_settings()


def duplicates(conn, settings) -> tuple[int, int]:
    keep = knowledge.add(conn, settings, "Likes green tea in the morning", owner_user_id=OWNER, source="cli")
    again = knowledge.add(conn, settings, "likes green tea in the morning!", owner_user_id=OWNER, source="cli")
    return keep, again


def test_the_daily_pass_is_due_at_the_owners_quiet_hour(settings):
    conn = connect(settings.database_path)
    assert daily.is_due(conn, settings, MORNING_UTC)  # never ran: at once
    daily.mark_done(conn, MORNING_UTC - 21 * HOUR)  # 13:00 the day before
    assert not daily.is_due(conn, settings, MORNING_UTC)  # 10:00 is not the quiet hour
    assert daily.is_due(conn, settings, QUIET_HOUR_UTC + 24 * HOUR)  # 04:30 the next day, 45 hours on
    daily.mark_done(conn, QUIET_HOUR_UTC - 3 * HOUR)
    assert not daily.is_due(conn, settings, QUIET_HOUR_UTC)  # the quiet hour, but only 3 hours on
    # A server never up at 04:00 (stopped when idle) runs it once the last pass is two days old.
    assert daily.is_due(conn, settings, MORNING_UTC + 48 * HOUR)
    # The owner's own /timezone wins over config.toml's: 04:30 in Tokyo is 19:30 UTC.
    store.touch_profile(conn, OWNER, None, "Alice")
    store.set_timezone(conn, OWNER, "Asia/Tokyo")
    daily.mark_done(conn, QUIET_HOUR_UTC - 24 * HOUR)
    assert not daily.is_due(conn, settings, QUIET_HOUR_UTC)
    assert daily.is_due(conn, settings, datetime(2026, 11, 26, 19, 30, tzinfo=UTC).timestamp() + 24 * HOUR)


async def test_the_pass_runs_once_a_day_and_announces_new_proposals_once(settings):
    conn = connect(settings.database_path)
    duplicates(conn, settings)
    now = [QUIET_HOUR_UTC]
    announced = []

    async def announce() -> None:
        announced.append(daily.announcements(conn))

    service = MemoryService(_db(settings), settings, complete=no_model, announce=announce, clock=lambda: now[0])
    await service.daily_if_due()
    assert daily.last_pass(conn) == QUIET_HOUR_UTC
    [proposal] = [p["id"] for p in _open(conn)]
    assert announced == [{OWNER: proposal}]

    # Restarted an hour later (a new service, the same database): not due again, nothing new.
    daily.announced(conn, OWNER)
    now[0] += HOUR
    again = MemoryService(_db(settings), settings, complete=no_model, announce=announce, clock=lambda: now[0])
    await again.daily_if_due()
    assert daily.last_pass(conn) == QUIET_HOUR_UTC and announced[-1] == {}


def _db(settings):
    from lib.db import Database

    return Database(settings.database_path)


def _open(conn) -> list[dict]:
    from lib.memory import consolidate

    return consolidate.open_proposals(conn)


def test_a_review_is_queued_outside_the_quiet_hours_and_only_once(settings):
    conn = connect(settings.database_path)
    daily.note_announcements(conn, {OWNER: 7})
    night = datetime(2026, 11, 27, 23, 30, tzinfo=UTC).timestamp()  # inside the default quiet hours
    assert queue_reviews(conn, settings, settings.bot_id, night) == []
    assert daily.announcements(conn) == {OWNER: 7}  # it waits
    assert queue_reviews(conn, settings, settings.bot_id, MORNING_UTC) == [OWNER]
    assert queue_reviews(conn, settings, settings.bot_id, MORNING_UTC) == []
    daily.note_announcements(conn, {OWNER: 7})  # the same proposals announced again: not queued twice
    assert queue_reviews(conn, settings, settings.bot_id, MORNING_UTC) == []
    kinds = [r[0] for r in conn.execute("SELECT kind FROM inbox")]
    assert kinds == ["memory_review"]


async def test_the_review_message_is_sent_with_a_button_each_and_apply_all(settings, bot):  # noqa: F811
    conn = connect(settings.database_path)
    keep, again = duplicates(conn, settings)
    tea = knowledge.add(conn, settings, "Drinks two coffees before nine", owner_user_id=OWNER, source="cli")
    knowledge.add(conn, settings, "drinks two coffees before nine.", owner_user_id=OWNER, source="cli")
    async with httpx.AsyncClient() as http:
        runtime = make_runtime(http)
        worker = telegram_worker(runtime, runner=None)
        service = MemoryService(runtime.db, settings, complete=no_model, clock=lambda: MORNING_UTC)
        await service.daily()
        assert queue_reviews(conn, settings, settings.bot_id, MORNING_UTC) == [OWNER]
        await worker.drain()

        [review] = bot.sent_to(ALICE)
        assert "Once a day I look over what I remember" in review["text"]
        labels = dict(buttons(review))
        assert set(labels) == {"Merge M1", "Keep both M1", "Merge M2", "Keep both M2", "Apply all"}

        # Both proposals decided with one press; the message is redrawn with nothing left.
        press = button_press(2, labels["Apply all"], message_for(bot, max(bot.messages), PRIVATE), presser=ALICE)
        from tests.support.telegram import deliver

        deliver(runtime, press)
        await worker.drain()
        assert knowledge.get(conn, again).superseded_by == keep
        assert not knowledge.get(conn, tea + 1).active
        assert bot.messages[max(bot.messages)]["text"] == "Nothing waits for your review."
        assert len(bot.sent_to(ALICE)) == 1  # one message, edited in place
        runtime.db.close()


async def test_nothing_is_sent_when_every_proposal_was_decided_before_the_message(settings, bot):  # noqa: F811
    from lib.memory import consolidate

    conn = connect(settings.database_path)
    duplicates(conn, settings)
    async with httpx.AsyncClient() as http:
        runtime = make_runtime(http)
        worker = telegram_worker(runtime, runner=None)
        await MemoryService(runtime.db, settings, complete=no_model, clock=lambda: MORNING_UTC).daily()
        assert queue_reviews(conn, settings, settings.bot_id, MORNING_UTC) == [OWNER]
        [proposal] = _open(conn)
        consolidate.skip(conn, proposal["id"])  # decided in `ash memory review` meanwhile
        await worker.drain()
        assert bot.sent_to(ALICE) == []
        runtime.db.close()
