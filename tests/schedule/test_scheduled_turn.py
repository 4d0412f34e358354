"""A task that runs a prompt is a real turn of the agent: "every morning at 8, summarise the weather in
Lisbon" runs at 08:00 Lisbon time with the tools, its tool output framed as data like in any turn,
and the exchange stored as the maker's. The model is a stub behind httpx2_mock."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx

from lib.agent import run_turn
from lib.schedule import store
from tests.schedule.conftest import OWNER, add_job, make_rig
from tests.support.agent import ANTHROPIC_MESSAGES, SSE, raw, request_json, set_keys
from tests.support.database import query
from tests.support.faults import anthropic_tool_use
from tests.support.telegram import make_runtime


async def test_a_morning_prompt_runs_as_a_turn_with_tools_at_eight_lisbon_time(
    env, monkeypatch, bot, httpx2_mock, sleeps, clock
):
    set_keys(monkeypatch, openai=False)
    route = httpx2_mock.post(ANTHROPIC_MESSAGES).mock(
        side_effect=[
            httpx.Response(200, content=body, headers=SSE)
            for body in (anthropic_tool_use("list_schedules", {}), raw("anthropic", "stream_text.sse"))
        ]
    )
    async with httpx.AsyncClient() as http:
        runtime = make_runtime(http)

        async def agent(turn, sink):
            return await run_turn(runtime, turn, sink)

        rig = make_rig(runtime, clock, runner=agent)
        job = add_job(
            runtime,
            clock(),
            cron="0 8 * * *",
            timezone="Europe/Lisbon",
            text="summarise the weather in Lisbon",
            action=store.PROMPT,
        )
        eight_in_lisbon = datetime(2026, 3, 28, 8, 0, tzinfo=UTC).timestamp()
        await rig.at(eight_in_lisbon - 1 - clock())
        assert route.calls.call_count == 0
        await rig.at(1)
        runtime.db.close()

    asked, after_tool = (request_json(call) for call in route.calls)
    question = asked["messages"][-1]["content"][-1]["text"]
    assert question.startswith(f"[Scheduled task #{job.id}, on the schedule `0 8 * * *` (Europe/Lisbon), set up")
    assert question.endswith("The request:]\nsummarise the weather in Lisbon")
    assert "schedule" in {tool["name"] for tool in asked["tools"]}
    [result] = after_tool["messages"][-1]["content"]
    assert result["content"].startswith('<tool_output tool="list_schedules">\n- #1 on the schedule')
    assert [m["text"] for m in bot.sent_to(OWNER)] == ["Hello there!"]
    stored = query(env, "SELECT role, owner_user_id, update_id FROM messages ORDER BY id")
    assert [(m["role"], m["owner_user_id"]) for m in stored] == [("user", str(OWNER)), ("assistant", str(OWNER))]
    assert stored[0]["update_id"] < 0  # the run's own inbox row: a resumed run replaces, never doubles
