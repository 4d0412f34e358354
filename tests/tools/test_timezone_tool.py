"""The set_timezone tool: the model sets the asker's own time zone, and the next prompt is in it."""

from __future__ import annotations

import httpx
import pytest

from lib.agent import TurnInput, run_turn
from lib.db import Database
from lib.memory import store
from lib.memory.scope import memory_owner
from lib.tools.base import ToolContext
from lib.tools.timezone_tool import SetTimezone
from tests.support.agent import (
    ANTHROPIC_MESSAGES,
    SSE,
    RecordingSink,
    configured_runtime,
    raw,
    request_json,
)
from tests.support.faults import anthropic_tool_use

OWNER = "1001"


@pytest.fixture
def runtime(ash_home, monkeypatch, sleeps):
    rt = configured_runtime(ash_home, monkeypatch, f'owner = {OWNER}\n[embeddings]\nprovider = "none"\n')
    yield rt
    rt.db.close()


@pytest.fixture
def database(settings, db_path):
    db = Database(db_path)
    yield db
    db.close()


def timezone_of(db: Database, user_id: str) -> str | None:
    profile = store.get_profile(db.conn(), user_id)
    return profile.timezone if profile else None


async def test_the_model_sets_the_time_zone_and_the_next_prompt_is_in_it(runtime, httpx2_mock):
    lisbon = anthropic_tool_use("set_timezone", {"timezone": "Europe/Lisbon"})
    text = raw("anthropic", "stream_text.sse")
    route = httpx2_mock.post(ANTHROPIC_MESSAGES).mock(
        side_effect=[httpx.Response(200, content=body, headers=SSE) for body in (lisbon, text, text)]
    )
    ask = TurnInput(provider="telegram", chat_id=OWNER, user_id=OWNER, text="I moved to Lisbon last week.")

    result = await run_turn(runtime, ask, RecordingSink())

    assert result.ok and result.tool_calls == ["set_timezone"]
    first, after_tool = (request_json(call) for call in route.calls)
    assert "set_timezone" in [tool["name"] for tool in first["tools"]]
    assert "(UTC)" in first["system"]
    [tool_result] = after_tool["messages"][-1]["content"]
    assert "The user's time zone is now Europe/Lisbon" in tool_result["content"]
    assert timezone_of(runtime.db, OWNER) == "Europe/Lisbon"

    await run_turn(runtime, ask, RecordingSink())

    assert "(Europe/Lisbon)" in request_json(route.calls.last)["system"]


async def test_an_unknown_zone_is_an_error_the_model_reads_and_nothing_changes(settings, database):
    context = ToolContext(user_id="7", chat_id="7", session_id=None, settings=settings, db=database)

    result = await SetTimezone().execute(SetTimezone.Input(timezone="Lisbon"), context)

    assert result.is_error
    assert "unknown time zone 'Lisbon'" in result.output and "Europe/Berlin" in result.output
    assert timezone_of(database, "7") is None


async def test_in_a_group_it_sets_the_speakers_own_zone_not_the_groups(settings, database):
    group = memory_owner("supergroup", "-100123", "7")
    context = ToolContext(
        user_id="7", chat_id="-100123", session_id=None, memory_owner=group, settings=settings, db=database
    )

    result = await SetTimezone().execute(SetTimezone.Input(timezone="Asia/Tokyo"), context)

    assert not result.is_error
    assert timezone_of(database, "7") == "Asia/Tokyo"
    assert timezone_of(database, group) is None
