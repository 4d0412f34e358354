"""Ash follows up, through the real inbox worker, the real scheduler and the Telegram handler
against the fake Bot API, on a clock the test moves: opt-in and out (off by default, the owner
alone turns a group on), a follow-up made from a message with no model call to notice it, moved,
cancelled, dismissed with its button, checked in once by a tool-less turn, never in quiet hours,
at most max_per_day, and silent after two unanswered until the person writes."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from click.testing import CliRunner

from lib.commands.cli import cli
from lib.db import connect, now_iso
from lib.schedule import followups, store
from lib.schedule.store import FOLLOWUP
from tests.schedule.conftest import MEMBER, OWNER, make_rig
from tests.support.database import query
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

HOUR = 3600.0
CHECK_IN = "How did it go?"


def at(day: int, hour: int, minute: int = 0) -> float:
    """A moment in March 2026, UTC (the config's zone)."""
    return datetime(2026, 3, day, hour, minute, tzinfo=UTC).timestamp()


@pytest.fixture
def rig(runtime, clock):
    turns: list = []

    def reply(turn) -> str:
        return CHECK_IN if turn.text.startswith("[Follow-up") else f"You said: {turn.text}"

    return make_rig(runtime, clock, runner=echo_runner(turns, reply), turns=turns)


class Chat:
    """The owner writing in their private chat (update ids in order)."""

    def __init__(self, rig, user: int = OWNER):
        self.rig, self.user, self.next_id = rig, user, 1000

    async def say(self, text: str, group: bool = False) -> None:
        self.next_id += 1
        update = group_text(self.next_id, text, self.user) if group else private_text(self.next_id, text, self.user)
        deliver(self.rig.runtime, update)
        await self.rig.worker.drain()

    async def until(self, moment: float, step: float = 600.0) -> None:
        """Run until `moment`: the clock moves `step` at a time, each time firing what is due and
        answering it (one jump would be downtime)."""
        while self.rig.clock() < moment:
            await self.rig.at(min(step, moment - self.rig.clock()))


def waiting(runtime, chat: int = OWNER) -> list[store.Job]:
    conn = connect(runtime.settings.database_path)
    try:
        return followups.waiting(conn, chat_id=str(chat))
    finally:
        conn.close()


def check_ins(rig) -> list:
    return [turn for turn in rig.turns if turn.text.startswith("[Follow-up")]


def texts(bot, chat=OWNER) -> list[str]:
    return [m["text"] for m in bot.sent_to(chat)]


async def test_off_by_default_nothing_is_followed_up(rig, bot):
    chat = Chat(rig)  # the clock: Friday 27 March 2026, 10:00 UTC
    await chat.say("I have a job interview Monday at 10")
    assert waiting(rig.runtime) == []
    await chat.until(at(31, 12))
    assert check_ins(rig) == []


async def test_an_event_becomes_a_followup_without_a_model_call_and_is_checked_in_once(rig, bot, env):
    chat = Chat(rig)
    await chat.say("/followups on")
    assert texts(bot)[-1].startswith("Follow-ups are on.")
    await chat.say("I have a job interview Monday at 10")

    assert len(rig.turns) == 1  # the answer to the message itself; noticing asked no model
    [job] = waiting(rig.runtime)
    assert (job.purpose, job.shown_kind, job.text, job.event_at) == (FOLLOWUP, "followup", "job interview", at(30, 10))
    assert job.next_run_at == at(30, 12)  # an hour for the interview, an hour to get home

    await chat.until(at(30, 12) - 1)
    assert check_ins(rig) == []
    await chat.until(at(30, 12))
    [turn] = check_ins(rig)
    assert turn.tools is False and '"job interview"' in turn.text
    assert texts(bot)[-1] == CHECK_IN
    await chat.until(at(31, 12))
    assert len(check_ins(rig)) == 1  # once
    assert query(env, "SELECT outcome FROM schedule_runs") == [{"outcome": "sent"}]


async def test_a_later_message_moves_the_followup_and_another_cancels_it(rig, bot):
    chat = Chat(rig)
    await chat.say("/followups on")
    await chat.say("dentist tomorrow 3pm")
    [job] = waiting(rig.runtime)
    assert job.event_at == at(28, 15)

    await chat.say("dentist moved to Tuesday at 4pm")
    [moved] = waiting(rig.runtime)
    assert (moved.id, moved.event_at, moved.next_run_at) == (job.id, at(31, 16), at(31, 18))

    await chat.say("dentist cancelled")
    assert waiting(rig.runtime) == []
    await chat.until(at(31, 23))
    assert check_ins(rig) == []


async def test_the_reminders_list_shows_a_followup_and_its_dismiss_button_removes_it(rig, bot):
    chat = Chat(rig)
    await chat.say("/followups on")
    await chat.say("flight to Lisbon on Sunday")
    [job] = waiting(rig.runtime)
    assert job.next_run_at == at(29, 19)  # all day: that evening (Europe's clocks moved; UTC did not)

    await chat.say("/reminders")
    listing = bot.sent_to(OWNER)[-1]
    assert f'#{job.id} follow-up on "flight to Lisbon", Sun 29 Mar 2026 (UTC); check-in: ' in listing["text"]
    assert buttons(listing) == [(f"Dismiss #{job.id}", f"reminders:cancel:{job.id}")]

    private = {"id": OWNER, "type": "private", "first_name": "Hirrolot"}
    deliver(rig.runtime, button_press(2001, f"reminders:cancel:{job.id}", as_shown(bot, private), OWNER))
    await rig.worker.drain()
    assert waiting(rig.runtime) == []
    assert bot.sent_to(OWNER)[-1]["text"].startswith(f'Dismissed #{job.id}: I will not ask about "flight to Lisbon".')
    await chat.until(at(30, 9))
    assert check_ins(rig) == []


async def test_never_inside_quiet_hours_even_after_downtime(rig, bot, env):
    chat = Chat(rig)
    await chat.say("/followups on")
    await chat.say("concert tonight at 9pm")  # 21:00 + 2 h is 23:00: inside 22:00-08:00
    [late_evening] = waiting(rig.runtime)
    assert late_evening.next_run_at == at(28, 8)
    await chat.until(at(28, 8) - 1)
    assert check_ins(rig) == []
    await chat.until(at(28, 8))
    assert len(check_ins(rig)) == 1

    await chat.say("thanks! I have a meeting tonight at 7pm")  # check-in 21:00, before the quiet hours
    # Ash is down from 20:00 until 22:30: the 21:00 check-in, late, would come inside them.
    await chat.until(at(28, 20))
    await chat.until(at(28, 22, 30), step=at(28, 22, 30) - at(28, 20))
    await chat.until(at(29, 12))
    assert len(check_ins(rig)) == 1
    assert query(env, "SELECT note FROM schedule_runs ORDER BY id")[-1] == {"note": "inside [followups] quiet_hours"}


async def test_at_most_max_per_day_check_ins_a_day(rig, bot, env):
    chat = Chat(rig)
    await chat.say("/followups on")
    await chat.say("exam tomorrow at 9")
    await chat.say("I have a meeting with the bank tomorrow at 11")
    await chat.say("I have a date with Sam tomorrow at 1pm")
    assert len(waiting(rig.runtime)) == 3

    await chat.until(at(28, 12))
    await chat.say("it went well")  # answered: not silenced, only capped
    await chat.until(at(28, 14))
    await chat.say("fine too")
    await chat.until(at(28, 20))
    assert len(check_ins(rig)) == 2  # max_per_day = 2
    notes = [r["note"] for r in query(env, "SELECT note FROM schedule_runs ORDER BY id")]
    assert notes[2] == "[followups] max_per_day reached"


async def test_silent_after_two_unanswered_until_the_person_writes(rig, bot, env):
    chat = Chat(rig)
    await chat.say("/followups on")
    await chat.say("dentist on Saturday at 9")
    await chat.say("doctor on Sunday at 9")
    await chat.say("haircut on Monday at 9")
    await chat.until(at(30, 12))
    assert len(check_ins(rig)) == 2  # Saturday's and Sunday's; Monday's: two unanswered
    assert query(env, "SELECT note FROM schedule_runs ORDER BY id")[-1]["note"] == (
        "the last 2 follow-ups are unanswered"
    )
    await chat.say("it went fine, thanks")
    await chat.say("interview on Tuesday at 9")
    await chat.until(at(31, 12))
    assert len(check_ins(rig)) == 3


async def test_in_a_group_only_the_owner_turns_followups_on(rig, bot):
    member, owner = Chat(rig, MEMBER), Chat(rig, OWNER)
    member.next_id = 5000
    await member.say("/followups on", group=True)
    assert texts(bot, GROUP)[-1] == "Only the owner can turn follow-ups on in a group."
    await owner.say("/followups on", group=True)
    assert texts(bot, GROUP)[-1].startswith("Follow-ups are on.")
    await member.say("@el_mon_test_bot my exam is on Tuesday at 9", group=True)
    [job] = waiting(rig.runtime, GROUP)
    assert (job.user_id, job.chat_id) == (str(MEMBER), str(GROUP))
    await member.say("/followups off", group=True)  # any member may turn them off
    assert waiting(rig.runtime, GROUP) == []


def test_ash_users_followups_turns_them_on_and_off(env, runtime):
    runner = CliRunner()
    assert runner.invoke(cli, ["users", "followups", str(MEMBER)]).output == f"follow-ups for {MEMBER} are off\n"
    done = runner.invoke(cli, ["users", "followups", str(MEMBER), "on"])
    assert done.exit_code == 0 and done.output == f"follow-ups for {MEMBER} turned on\n"
    conn = connect(runtime.settings.database_path)
    try:
        assert followups.enabled(conn, str(MEMBER))
    finally:
        conn.close()
    assert runner.invoke(cli, ["users", "followups", "ann", "on"]).exit_code != 0


def made(runtime, text: str, now: float) -> followups.Change:
    """A follow-up made from `text` in MEMBER's private chat, follow-ups on, as a message would."""
    conn = connect(runtime.settings.database_path)
    try:
        followups.set_enabled(conn, str(MEMBER), True, "test", now)
        return followups.on_message(conn, runtime.settings, followups.Where(str(MEMBER), str(MEMBER)), text, now)
    finally:
        conn.close()


def test_ash_schedule_list_and_the_admin_api_show_kind_event_and_time(env, runtime, clock, monkeypatch):
    monkeypatch.setenv("ASH_ADMIN_TOKEN", "admin-token-for-tests")
    job = made(runtime, "My flight to Tokyo is on Monday at 6am", clock()).job

    listed = CliRunner().invoke(cli, ["schedule", "list"]).output
    assert f'#{job.id} follow-up on "flight to Tokyo", Mon 30 Mar 2026, 06:00 (UTC); check-in: Mon 30 Mar' in listed
    from litestar.testing import TestClient

    from app import app

    with TestClient(app=app) as client:
        [item] = client.get("/admin/schedules", headers={"Authorization": "Bearer admin-token-for-tests"}).json()[
            "items"
        ]
    assert (item["kind"], item["event"], item["event_at"]) == (
        "followup",
        "flight to Tokyo",
        "2026-03-30T06:00:00.000Z",
    )
    assert item["next_run_at"] == "2026-03-30T08:00:00.000Z"


def test_followups_take_no_room_from_the_persons_tasks_and_forgetting_removes_their_state(env, runtime, clock):
    made(runtime, "I have an exam on Tuesday at 9", clock())
    conn = connect(runtime.settings.database_path)
    try:
        assert store.one(conn, store.ACTIVE_COUNT_SQL, (str(MEMBER),))["n"] == 0
        followups.sent(conn, str(MEMBER))
        store.delete_user(conn, str(MEMBER))
        assert not followups.enabled(conn, str(MEMBER))
        assert query(env, "SELECT * FROM followup_people") == []
    finally:
        conn.close()


async def test_a_spent_daily_token_budget_skips_the_check_in_without_a_model_call(rig, bot, env):
    chat = Chat(rig)
    await chat.say("/followups on")
    await chat.say("I have a job interview tomorrow at 10")
    rig.runtime.settings.config.agent.daily_token_budget = 100
    conn = connect(rig.runtime.settings.database_path)
    try:
        from lib.agent.usage import INSERT_USAGE_SQL

        conn.execute(INSERT_USAGE_SQL, (now_iso(), str(OWNER), None, "anthropic", "m", "chat", 400, 100, 0.0))
    finally:
        conn.close()
    sent_before = len(bot.sent_to(OWNER))
    await chat.until(at(28, 13))
    assert check_ins(rig) == []
    assert len(bot.sent_to(OWNER)) == sent_before
    assert query(env, "SELECT outcome, note FROM schedule_runs") == [
        {"outcome": "skipped", "note": "the daily token budget is spent"}
    ]


def test_the_same_event_said_again_updates_it_and_another_day_makes_a_second(env, runtime, clock):
    first = made(runtime, "I have an exam on Tuesday at 9", clock())
    again = made(runtime, "exam on Tuesday at 10, I misremembered", clock())
    other = made(runtime, "and another exam on Thursday at 9", clock())
    assert (first.what, again.what, other.what) == ("event", "event", "event")
    assert again.job.id == first.job.id and again.job.event_at == at(31, 10)
    assert other.job.id != first.job.id
    audited = "SELECT action FROM audit_log WHERE action IN ('followup_create', 'followup_move') ORDER BY id"
    rows = query(env, audited)
    assert [r["action"] for r in rows] == ["followup_create", "followup_move", "followup_create"]
