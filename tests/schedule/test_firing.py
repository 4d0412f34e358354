"""Firing scheduled tasks through the real inbox worker and Telegram handler, against the fake Bot
API, on a clock the test moves: one-time, interval, cron in a zone across DST, catch-up after
downtime, lateness, order within the chat, exactly once, topics, cancellation, limits of runs."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from datetime import UTC, datetime

import pytest

from lib.agent import TurnResult
from lib.db import connect, now_iso
from lib.errors import Rejected
from lib.inbox import queue
from lib.inbox.scheduler import TIMER_SLACK, Scheduler, fire_due
from lib.schedule import store
from lib.telegram.intake import parse
from lib.tools.base import ToolContext
from lib.tools.schedule_tools import Schedule
from tests.schedule.conftest import MEMBER, OWNER, START, add_job, job_row, make_rig
from tests.support.clock import Clock
from tests.support.database import query
from tests.support.telegram import BOT_ID, GROUP, deliver, group_text, private_text

MINUTE = 60.0


def texts(bot, chat=OWNER) -> list[str]:
    return [m["text"] for m in bot.sent_to(chat)]


def runs(env) -> list[dict]:
    return query(env, "SELECT schedule_id, scheduled_for, outcome, note FROM schedule_runs ORDER BY id")


async def test_a_one_time_reminder_fires_at_its_time_once(rig, bot, env):
    job = add_job(rig.runtime, rig.clock(), at="in 20 minutes", text="stretch your legs")

    assert await rig.at(20 * MINUTE - 1) == 0
    assert texts(bot) == []
    assert await rig.at(1) == 1
    assert texts(bot) == ["⏰ stretch your legs"]
    assert await rig.at(3600) == 0  # and never again
    assert texts(bot) == ["⏰ stretch your legs"]

    done = job_row(rig.runtime, job.id)
    assert (done.status, done.next_run_at, done.run_count, done.last_outcome) == ("done", None, 1, "sent")
    assert runs(env) == [{"schedule_id": job.id, "scheduled_for": START + 1200, "outcome": "sent", "note": None}]


async def test_an_interval_task_runs_every_interval(rig, bot, env):
    job = add_job(rig.runtime, rig.clock(), every="15 minutes", text="water")
    for _ in range(3):
        await rig.at(7 * MINUTE)
        await rig.at(8 * MINUTE)
    assert texts(bot) == ["⏰ water"] * 3
    assert [r["scheduled_for"] - START for r in runs(env)] == [900, 1800, 2700]
    assert job_row(rig.runtime, job.id).next_run_at == START + 3600


async def test_a_daily_cron_in_lisbon_keeps_eight_oclock_across_the_dst_change(rig, bot, env):
    add_job(rig.runtime, rig.clock(), cron="0 8 * * *", timezone="Europe/Lisbon", text="weather")
    saturday_8_utc = datetime(2026, 3, 28, 8, 0, tzinfo=UTC).timestamp()
    sunday_7_utc = datetime(2026, 3, 29, 7, 0, tzinfo=UTC).timestamp()  # 08:00 WEST

    await rig.at(saturday_8_utc - 1 - rig.clock())
    assert texts(bot) == []
    await rig.at(1)
    assert texts(bot) == ["⏰ weather"]
    await rig.at(sunday_7_utc - 1 - rig.clock())
    assert texts(bot) == ["⏰ weather"]
    await rig.at(1)
    assert texts(bot) == ["⏰ weather"] * 2
    await rig.at(3600)  # 08:00 UTC on Sunday is 09:00 in Lisbon: nothing
    assert texts(bot) == ["⏰ weather"] * 2
    assert [r["scheduled_for"] for r in runs(env)] == [saturday_8_utc, sunday_7_utc]


async def test_two_hours_down_gives_an_every_15_minutes_task_one_catch_up_run_not_eight(rig, bot, env):
    job = add_job(rig.runtime, rig.clock(), every="15 minutes", text="check the oven")
    await rig.at(15 * MINUTE)
    assert texts(bot) == ["⏰ check the oven"]

    # The process is down for two hours: eight run times pass.
    await rig.at(2 * 3600 + 30)

    sent = texts(bot)
    assert len(sent) == 2
    assert sent[1].startswith("⏰ check the oven\n\n<i>(This comes late: it was due Fri 27 Mar 2026, 12:15 (UTC)")
    assert "7 earlier runs in that time were missed and are not repeated" in sent[1]
    assert len(runs(env)) == 2
    assert runs(env)[1]["note"] == "late by 30 s, for 7 missed run(s)"
    # It goes on from its next time, and on time from then on.
    assert job_row(rig.runtime, job.id).next_run_at == START + 15 * MINUTE + 2 * 3600 + 15 * MINUTE
    await rig.at(15 * MINUTE)
    assert texts(bot)[2] == "⏰ check the oven"


async def test_a_missed_one_time_reminder_fires_once_and_says_it_is_late(rig, bot, env):
    add_job(rig.runtime, rig.clock(), at="in 10 minutes", text="take the pill")
    await rig.at(3 * 3600)  # down from before its time until three hours after it
    [late] = texts(bot)
    assert late == (
        "⏰ take the pill\n\n<i>(This comes late: it was due Fri 27 Mar 2026, 10:10 (UTC), "
        "while I was not running.)</i>"
    )
    await rig.at(MINUTE)
    assert len(texts(bot)) == 1


async def test_a_run_later_than_max_lateness_is_skipped_and_logged(rig, bot, env, caplog):
    job = add_job(rig.runtime, rig.clock(), at="in 10 minutes", text="too late now")
    assert rig.runtime.settings.config.scheduler.max_lateness == 6 * 3600
    with caplog.at_level(logging.WARNING, logger="ash.scheduler"):
        assert await rig.at(10 * MINUTE + 6 * 3600 + 1) == 0
    assert texts(bot) == []
    assert f"task {job.id}: skipped its run due 21601 s ago, later than [scheduler] max_lateness" in caplog.text
    assert runs(env)[0]["outcome"] == "missed"
    assert job_row(rig.runtime, job.id).status == "done"


async def test_queued_work_runs_after_what_the_chat_received_and_never_beside_a_turn(runtime, clock, bot, env):
    running: list[str] = []
    most = 0
    order: list[str] = []

    async def slow(turn, sink):
        nonlocal most
        running.append(turn.text)
        most = max(most, len(running))
        order.append(turn.text.rsplit("\n", 1)[-1])
        await asyncio.sleep(0.02)
        await sink.finish(f"re: {turn.text}")
        running.remove(turn.text)
        return TurnResult("ok")

    rig = make_rig(runtime, clock, runner=slow)
    add_job(runtime, clock(), at="in 1 minute", text="what's on my list?", action=store.PROMPT)
    deliver(runtime, private_text(100, "first"))
    clock.advance(MINUTE)
    await rig.scheduler.tick()  # fired while "first" waits: it goes behind it
    deliver(runtime, private_text(101, "second"))  # and "second" behind the task

    [row] = query(env, "SELECT follows, kind, chat_key FROM inbox WHERE update_id < 0")
    assert row == {"follows": 100, "kind": "scheduled", "chat_key": str(OWNER)}
    second = make_rig(runtime, clock, runner=slow).worker  # another process's worker on the same inbox
    await asyncio.gather(rig.worker.drain(), second.drain())

    assert order == ["first", "what's on my list?", "second"]
    assert most == 1


async def test_a_time_fires_once_whoever_fires_it(runtime, clock, env):
    add_job(runtime, clock(), at="in 5 minutes")
    for i in range(20):
        add_job(runtime, clock(), every="10 minutes", text=f"job {i}")
    clock.advance(10 * MINUTE)
    queued: list[list[int]] = []

    def fire() -> None:
        conn = connect(env)
        try:
            queued.append(fire_due(conn, runtime.settings, BOT_ID, clock()))
        finally:
            conn.close()

    threads = [threading.Thread(target=fire) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(len(q) for q in queued)[-1] == 21 and sum(len(q) for q in queued) == 21
    assert query(env, "SELECT count(*) AS n FROM schedule_runs")[0]["n"] == 21
    assert query(env, "SELECT count(*) AS n FROM inbox")[0]["n"] == 21

    conn = connect(env)
    job = store.listing(conn)[0]
    # The run of a (task, time) is unique: recording it again records nothing.
    assert store.record_run(conn, job.id, START + 600, clock(), "queued") is None
    conn.close()


async def test_a_task_made_in_a_forum_topic_writes_in_that_topic(rig, bot):
    add_job(rig.runtime, rig.clock(), at="in 2 minutes", chat=GROUP, chat_type="supergroup", thread=77, text="standup")
    await rig.at(2 * MINUTE)
    [sent] = bot.sent_to(GROUP)
    assert (sent["text"], sent["message_thread_id"], sent["reply_parameters"]) == ("⏰ standup", 77, None)


async def test_a_run_queued_and_then_cancelled_or_forgotten_is_skipped(rig, bot, env):
    cancelled = add_job(rig.runtime, rig.clock(), every="1 minute", text="cancelled")
    forgotten = add_job(rig.runtime, rig.clock(), at="in 1 minute", text="forgotten", user=MEMBER, chat=MEMBER)
    rig.clock.advance(MINUTE)
    assert await rig.scheduler.tick() == 2
    conn = connect(env)
    store.cancel(conn, cancelled.id, "test", rig.clock())
    store.delete_user(conn, str(MEMBER))
    conn.close()

    await rig.worker.drain()

    assert texts(bot) == [] and texts(bot, MEMBER) == []
    notes = sorted(r["last_error"] for r in query(env, "SELECT last_error FROM inbox WHERE status = 'skipped'"))
    assert notes == [
        f"scheduled task #{cancelled.id}: cancelled before it ran",
        f"scheduled task #{forgotten.id} no longer exists (forgotten or removed)",
    ]


async def test_count_and_until_end_a_task(rig, bot, env):
    counted = add_job(rig.runtime, rig.clock(), every="15 minutes", count=2, text="twice")
    until = add_job(rig.runtime, rig.clock(), every="20 minutes", until="in 50 minutes", text="until")
    for _ in range(12):
        await rig.at(5 * MINUTE)
    assert texts(bot).count("⏰ twice") == 2
    assert texts(bot).count("⏰ until") == 2  # at 20 and 40 minutes; 60 is past the end
    for job in (counted, until):
        assert job_row(rig.runtime, job.id).status == "done"


async def test_a_prompt_runs_as_a_turn_of_its_maker_in_its_chat(runtime, clock, bot, env):
    turns = []
    rig = make_rig(runtime, clock, turns=turns)
    job = add_job(
        runtime, clock(), at="in 1 minute", text="summarise the weather in Lisbon", action=store.PROMPT, thread=5
    )
    await rig.at(MINUTE)
    [turn] = turns
    assert (turn.user_id, turn.chat_id, turn.chat_type, turn.message_thread_id) == (
        str(OWNER),
        str(OWNER),
        "private",
        5,
    )
    assert turn.update_id < 0
    assert turn.text.startswith(f"[Scheduled task #{job.id}, once, set up earlier by this user; this run was due")
    assert turn.text.endswith("The request:]\nsummarise the weather in Lisbon")
    assert texts(bot) == [f"You said: {turn.text}"]


async def test_the_daily_token_budget_applies_to_prompt_tasks(runtime, clock, bot, env):
    from lib.agent.usage import record_usage
    from lib.llm.types import Usage

    runtime.settings.config.agent.daily_token_budget = 100
    conn = connect(env)
    record_usage(conn, runtime.settings, provider="anthropic", model="m", usage=Usage(90, 20), user_id=str(OWNER))
    conn.close()
    turns = []
    rig = make_rig(runtime, clock, turns=turns)
    job = add_job(runtime, clock(), at="in 1 minute", text="summarise my inbox", action=store.PROMPT)
    await rig.at(MINUTE)
    assert turns == []
    assert texts(bot) == [
        f'I skipped your scheduled task #{job.id} (runs the prompt "summarise my inbox"): today\'s token budget '
        "is spent. It runs again at its next time."
    ]
    assert runs(env)[0]["outcome"] == "skipped"


async def test_the_timer_fires_a_due_task_within_a_second_not_at_the_next_tick(runtime, bot, env):
    assert runtime.settings.config.server.tick_interval == 15
    worker = make_rig(runtime, time.time).worker
    clock = Clock()  # stands still: the timer's delay is exactly what the scheduler chose
    scheduler = Scheduler(runtime.db, runtime.settings, BOT_ID, wake=worker.kick, clock=clock)
    await worker.start()
    await scheduler.start()
    try:
        await armed_for_a_whole_tick(scheduler)
        add_job(runtime, clock(), at="in 1 second", text="now")
        scheduler.kick()  # what the schedule tool does after making a task
        await asyncio.wait_for(scheduler.armed.wait(), CEILING)
        assert scheduler.armed_for == pytest.approx(1.0 + TIMER_SLACK)  # re-armed for the task, not the tick
        clock.advance(1.0)
        await arrival(bot)
    finally:
        await scheduler.stop()
        await worker.stop()
    assert texts(bot) == ["⏰ now"]


# A generous ceiling for what the test waits on (never the thing measured): CI's 2 busy cores.
CEILING = 60.0


async def armed_for_a_whole_tick(scheduler: Scheduler) -> None:
    """Wait until the timer is armed with nothing due (it would sleep a whole tick), then clear
    the signal so the next arming can be waited for."""
    await asyncio.wait_for(scheduler.armed.wait(), CEILING)
    assert scheduler.armed_for == scheduler.settings.config.server.tick_interval
    scheduler.armed.clear()


async def arrival(bot) -> None:
    """Wait for the first message to reach the fake Bot API."""
    deadline = time.monotonic() + CEILING
    while not texts(bot) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)


async def test_a_task_the_schedule_tool_makes_rearms_the_servers_timer_through_the_runtimes_signal(runtime, bot):
    worker = make_rig(runtime, time.time).worker
    changed = runtime.signals.schedule_changed
    clock = Clock(time.time())
    scheduler = Scheduler(runtime.db, runtime.settings, BOT_ID, wake=worker.kick, schedule_changed=changed, clock=clock)
    context = ToolContext(
        user_id=str(OWNER),
        chat_id=str(OWNER),
        session_id=None,
        settings=runtime.settings,
        db=runtime.db,
        signals=runtime.signals,
    )
    await worker.start()
    await scheduler.start()
    try:
        await armed_for_a_whole_tick(scheduler)
        made = await Schedule().execute(Schedule.Input(at="in 1 second", message="now"), context)
        assert not made.is_error, made.output
        await asyncio.wait_for(scheduler.armed.wait(), CEILING)  # the signal re-armed it
        # Re-armed for the task (in 1 second by the wall clock the tool read), not for a whole tick.
        assert scheduler.armed_for < runtime.settings.config.server.tick_interval
        clock.advance(scheduler.armed_for)
        await arrival(bot)
    finally:
        await scheduler.stop()
        await worker.stop()
    assert texts(bot) == ["⏰ now"]


def test_the_webhook_refuses_update_ids_in_the_space_queued_work_uses():
    with pytest.raises(Rejected) as refused:
        parse(b'{"update_id": -5, "message": {"text": "x"}}')
    assert refused.value.status == 400
    assert parse(b'{"update_id": 0}')[0] == 0


async def test_queued_work_and_a_telegram_update_with_the_same_number_both_run(rig, bot, env):
    job = add_job(rig.runtime, rig.clock(), at="in 1 minute", text="mine")
    rig.clock.advance(MINUTE)
    await rig.scheduler.tick()
    [(update_id,)] = [(r["update_id"],) for r in query(env, "SELECT update_id FROM inbox")]
    deliver(rig.runtime, private_text(-update_id, "yours"))
    await rig.worker.drain()
    assert sorted(texts(bot)) == ["You said: yours", "⏰ mine"]
    assert job_row(rig.runtime, job.id).last_outcome == "sent"


async def test_a_task_that_cannot_be_read_is_stopped_and_spoils_no_other(rig, bot, env, caplog):
    good = add_job(rig.runtime, rig.clock(), at="in 1 minute", text="still fires")
    bad = add_job(rig.runtime, rig.clock(), at="in 1 minute", text="broken")
    conn = connect(env)
    conn.execute("UPDATE schedules SET kind = 'cron', cron = 'not cron' WHERE id = ?", (bad.id,))
    conn.close()
    with caplog.at_level(logging.ERROR, logger="ash.scheduler"):
        await rig.at(MINUTE)
    assert texts(bot) == ["⏰ still fires"]
    assert f"task {bad.id} cannot be fired; it is stopped" in caplog.text
    assert job_row(rig.runtime, bad.id).status == "done"
    assert job_row(rig.runtime, good.id).last_outcome == "sent"


def test_enqueue_own_refuses_an_id_that_is_not_its_own(conn):
    with pytest.raises(ValueError, match="own ids are positive"):
        queue.enqueue_own(conn, BOT_ID, 0, "1", queue.SCHEDULED, b"{}")
    conn.execute(
        "INSERT INTO inbox (bot_id, update_id, chat_key, kind, payload, received_at) VALUES (?, 500, '1', 'message', "
        "x'7b7d', ?)",
        (BOT_ID, now_iso()),
    )
    assert queue.enqueue_own(conn, BOT_ID, 3, "1", queue.SCHEDULED, b"{}") == -3
    assert query(conn.filename, "SELECT follows FROM inbox WHERE update_id = -3") == [{"follows": 500}]


def test_the_due_query_searches_the_index_of_active_tasks(conn):
    plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + store.DUE_SQL, {"now": START, "limit": 200})]
    assert plan[0] == "SEARCH s USING INDEX schedules_due (next_run_at<?)"


async def test_a_run_telegram_refuses_is_recorded_failed_and_the_topic_told_once(rig, bot, env):
    job = add_job(rig.runtime, rig.clock(), at="in 1 minute", chat=GROUP, chat_type="supergroup", thread=8, text="x")
    bot.fail["sendMessage"] = [(400, {"ok": False, "error_code": 400, "description": "Bad Request: not enough rights"})]
    await rig.at(MINUTE)
    [notice] = bot.sent_to(GROUP)
    assert (
        notice["text"]
        == f"I could not run scheduled task #{job.id} (I tried once); it runs again at its next time, if it has one."
    )
    assert notice["message_thread_id"] == 8
    assert runs(env)[0]["outcome"] == "failed" and runs(env)[0]["note"] == "gave up after 1 attempt(s)"
    assert query(env, "SELECT status FROM inbox") == [{"status": "failed"}]


async def test_stop_in_a_group_stops_a_running_prompt_task_for_its_maker_not_for_others(runtime, clock, bot, env):
    from lib.conversation.access import allow

    conn = connect(env)
    allow(conn, "3003")
    conn.close()
    started = asyncio.Event()

    async def endless(turn, sink):
        await sink.update("thinking")
        started.set()
        await asyncio.sleep(60)
        return TurnResult("never")

    rig = make_rig(runtime, clock, runner=endless)
    add_job(
        runtime,
        clock(),
        at="in 1 minute",
        text="plan the week",
        action=store.PROMPT,
        user=MEMBER,
        chat=GROUP,
        chat_type="supergroup",
        thread=6,
    )
    clock.advance(MINUTE)
    await rig.scheduler.tick()
    running = asyncio.create_task(rig.worker.drain())
    await asyncio.wait_for(started.wait(), 5)

    deliver(runtime, group_text(60, "/stop", 3003))  # not theirs: it waits its turn
    await rig.worker.pump()
    assert not running.done()
    deliver(runtime, group_text(61, "/stop", MEMBER))
    await rig.worker.pump()
    await asyncio.wait_for(running, 5)

    stopped = [m for m in bot.sent_to(GROUP) if m["text"] == "Stopped."]
    assert [m["message_thread_id"] for m in stopped] == [6]
    assert query(env, "SELECT update_id, status FROM inbox WHERE update_id > 0 ORDER BY update_id") == [
        {"update_id": 60, "status": "done"},
        {"update_id": 61, "status": "done"},
    ]


async def test_a_group_that_became_a_supergroup_takes_its_tasks_along(rig, bot, env):
    job = add_job(rig.runtime, rig.clock(), every="1 hour", chat=-4242, chat_type="group", text="water the plants")
    upgraded = {
        "ok": False,
        "error_code": 400,
        "description": "Bad Request: group chat was upgraded to a supergroup chat",
        "parameters": {"migrate_to_chat_id": -1001234},
    }
    bot.fail["sendMessage"] = [(400, upgraded)]
    await rig.at(3600)
    assert texts(bot, -1001234) == ["⏰ water the plants"]
    assert job_row(rig.runtime, job.id).chat_id == "-1001234"
    await rig.at(3600)
    assert texts(bot, -1001234) == ["⏰ water the plants"] * 2


async def test_a_late_prompt_task_tells_the_model_it_runs_late(runtime, clock, bot):
    turns = []
    rig = make_rig(runtime, clock, turns=turns)
    add_job(runtime, clock(), every="1 day", text="plan my day", action=store.PROMPT)
    await rig.at(2 * 86400 + 3600)  # down through its first two runs (Saturday and Sunday 10:00)
    [turn] = turns
    assert (
        "; it runs late: it was due Sun 29 Mar 2026, 10:00 (UTC), while I was not running; 1 earlier run" in turn.text
    )
