"""The `schedule`, `list_schedules` and `cancel_schedule` tools over a real database: what they store,
the errors the model reads instead of a crash, who may cancel, and the limits."""

from __future__ import annotations

import msgspec
import pytest

from lib.db import Database, connect
from lib.memory import store as memory_store
from lib.runtime import Signals
from lib.schedule import store
from lib.tools.base import ToolContext
from lib.tools.schedule_tools import CancelSchedule, ListSchedules, Schedule
from tests.schedule.conftest import MEMBER, OWNER
from tests.support.telegram import GROUP


@pytest.fixture
def database(env):
    db = Database(env)
    yield db
    db.close()


def context(configured, database, *, user=OWNER, chat=OWNER, chat_type="private", provider="telegram", **extra):
    return ToolContext(
        user_id=str(user),
        chat_id=str(chat),
        session_id=None,
        provider=provider,
        chat_type=chat_type,
        settings=configured,
        db=database,
        **extra,
    )


async def schedule(ctx, **args):
    return await Schedule().execute(Schedule.Input(**args), ctx)


def jobs(env) -> list[store.Job]:
    conn = connect(env)
    try:
        return store.listing(conn, everything=True)
    finally:
        conn.close()


@pytest.fixture
def configured(runtime):
    """The settings of the runtime over the test's database (owner and member allowed)."""
    return runtime.settings


async def test_a_reminder_is_stored_for_the_asker_in_their_chat_topic_and_zone(configured, database, env):
    conn = connect(env)
    memory_store.set_timezone(conn, str(OWNER), "Asia/Tokyo")
    conn.close()
    changed = []
    signals = Signals()
    signals.schedule_changed.connect(lambda: changed.append(1))
    ctx = context(configured, database, chat=GROUP, chat_type="supergroup", message_thread_id=9, signals=signals)

    result = await schedule(ctx, at="2030-05-01T09:00", message="call Ana")

    assert not result.is_error
    [job] = jobs(env)
    assert result.output == (
        f'Scheduled task #{job.id}: once, sends "call Ana"; first run Wed 1 May 2030, 09:00 (Asia/Tokyo). '
        "Tell the user when it will run."
    )
    assert (job.user_id, job.chat_id, job.chat_type, job.message_thread_id) == (str(OWNER), str(GROUP), "supergroup", 9)
    assert (job.timezone, job.action, job.text) == ("Asia/Tokyo", "message", "call Ana")
    assert changed == [1]  # the server's timer re-arms


async def test_without_a_zone_of_their_own_the_configured_zone_is_used_never_silent_utc(configured, database, env):
    configured.config.timezone = "America/Sao_Paulo"
    result = await schedule(context(configured, database), cron="0 8 * * *", prompt="summarise the weather in Lisbon")
    assert "(America/Sao_Paulo)" in result.output
    assert jobs(env)[0].timezone == "America/Sao_Paulo"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"at": "in 5 minutes", "timezone": "Lisbon", "message": "x"}, "There is no time zone called 'Lisbon'"),
        ({"at": "2020-01-01T09:00", "message": "x"}, "is in the past"),
        ({"at": "whenever", "message": "x"}, "I can't read 'whenever' as a time"),
        ({"at": "in 5 minutes"}, "Give exactly one of message"),
        ({"at": "in 5 minutes", "message": "x", "prompt": "y"}, "Give exactly one of message"),
        ({"message": "x"}, "Say when"),
        ({"cron": "0 8 * * * *", "message": "x"}, "give five fields"),
        ({"every": "10 seconds", "message": "x"}, "The shortest interval is one minute"),
        ({"every": "30 minutes", "prompt": "check the news"}, "may run at most once every 1 hour"),
        ({"cron": "*/5 * * * *", "prompt": "check the news"}, "may run at most once every 1 hour"),
        ({"every": "1 hour", "until": "in 10 minutes", "message": "x"}, "The end comes before the first run"),
        ({"at": "in 5 minutes", "message": "  "}, "the text is empty"),
    ],
)
async def test_bad_input_is_an_error_the_model_can_act_on(configured, database, env, args, message):
    result = await schedule(context(configured, database), **args)
    assert result.is_error
    assert message in result.output
    assert jobs(env) == []


async def test_a_person_may_have_only_so_many_active_tasks(configured, database, env):
    configured.config.scheduler.max_jobs_per_user = 2
    ctx = context(configured, database)
    for minutes in (5, 6):
        assert not (await schedule(ctx, at=f"in {minutes} minutes", message="x")).is_error
    refused = await schedule(ctx, at="in 7 minutes", message="x")
    assert refused.is_error and "You already have 2 active scheduled tasks" in refused.output
    # Another person has their own allowance.
    assert not (
        await schedule(context(configured, database, user=MEMBER, chat=MEMBER), at="in 7 minutes", message="x")
    ).is_error


async def test_list_shows_this_chats_tasks_only(configured, database, env):
    await schedule(context(configured, database), every="2 hours", message="drink water")
    await schedule(context(configured, database, user=MEMBER, chat=MEMBER), at="in 1 hour", message="other chat")
    listed = await ListSchedules().execute(ListSchedules.Input(), context(configured, database))
    assert listed.output.startswith('- #1 every 2 hours, sends "drink water"; next: ')
    assert "other chat" not in listed.output
    empty = await ListSchedules().execute(ListSchedules.Input(), context(configured, database, chat=GROUP))
    assert empty.output == "There are no active scheduled tasks in this chat."


async def test_in_a_group_only_the_maker_or_the_owner_cancels(configured, database, env):
    group = {"chat": GROUP, "chat_type": "supergroup"}
    await schedule(context(configured, database, user=OWNER, **group), every="1 day", message="owner's")
    await schedule(context(configured, database, user=MEMBER, **group), every="1 day", message="member's")
    owners, members = (job.id for job in sorted(jobs(env), key=lambda j: j.id))
    member = context(configured, database, user=MEMBER, **group)

    refused = await CancelSchedule().execute(CancelSchedule.Input(id=owners), member)
    assert refused.is_error and "made by someone else: only they or the owner may cancel it" in refused.output
    own = await CancelSchedule().execute(CancelSchedule.Input(id=members), member)
    assert own.output.startswith(f"Cancelled task #{members}")
    elsewhere = await CancelSchedule().execute(CancelSchedule.Input(id=owners), context(configured, database))
    assert elsewhere.is_error and f"no active scheduled task #{owners} in this chat" in elsewhere.output
    by_owner = await CancelSchedule().execute(CancelSchedule.Input(id=owners), context(configured, database, **group))
    assert not by_owner.is_error
    assert {job.status for job in jobs(env)} == {"cancelled"}


async def test_in_the_terminal_tasks_go_to_the_persons_private_telegram_chat(configured, database, env):
    result = await schedule(context(configured, database, chat="cli", provider="cli"), at="in 1 hour", message="x")
    assert not result.is_error
    assert jobs(env)[0].chat_id == str(OWNER)
    nobody = await schedule(
        context(configured, database, user="local", chat="cli", provider="cli"), at="in 1 hour", message="x"
    )
    assert nobody.is_error and "set `owner` in config.toml" in nobody.output


async def test_the_model_is_offered_the_three_tools(configured):
    from lib.tools.registry import available_tools

    names = [tool.name for tool in available_tools(configured)]
    assert {"schedule", "list_schedules", "cancel_schedule"} <= set(names)


def test_an_id_below_one_never_reaches_the_tool():
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"id": 0}, CancelSchedule.Input)
