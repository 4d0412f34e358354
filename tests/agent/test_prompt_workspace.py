"""What the system prompt says about tools and the owner (a newcomer's findings).

TOOLS.md told the model it had bash and web search when neither was offered, and said nothing of
schedule, web_fetch or set_timezone; an unfilled USER.md template ("Name: (your name)") was sent
as if it described the owner. Through a real turn with the bundled workspace (the model stubbed
at the network edge), the system prompt the model receives is read."""

from __future__ import annotations

import shutil

import pytest

from lib.agent.contract import TurnInput
from lib.agent.turn import run_turn
from lib.config import BUNDLED_WORKSPACE
from tests.support.agent import (
    ANTHROPIC_MESSAGES,
    RecordingSink,
    make_runtime,
    request_json,
    set_keys,
    sse_response,
    write_config,
)

OWNER = "1001"


@pytest.fixture
def bundled(ash_home, db_path, monkeypatch, httpx2_mock):
    """A runtime over a copy of the bundled workspace, no sandbox and no search key; the model route."""
    workspace = ash_home / "workspace-copy"
    shutil.copytree(BUNDLED_WORKSPACE, workspace)
    config = f'owner = {OWNER}\n[sandbox]\nenabled = false\n[embeddings]\nprovider = "none"\n'
    write_config(ash_home, config, workspace=workspace)
    set_keys(monkeypatch, openai=False)
    route = httpx2_mock.post(ANTHROPIC_MESSAGES).mock(return_value=sse_response("anthropic", "stream_text.sse"))
    runtime = make_runtime()
    yield runtime, route, workspace
    runtime.db.close()


async def asked(runtime, route) -> dict:
    await run_turn(runtime, TurnInput("telegram", OWNER, OWNER, "hello"), RecordingSink())
    return request_json(route.calls.last)


async def test_the_prompt_names_exactly_the_tools_offered(bundled):
    runtime, route, _ = bundled
    sent = await asked(runtime, route)
    offered = {tool["name"] for tool in sent["tools"]}
    listed = sent["system"].split("## Tools you can call now\n", 1)[1].split("\n\n", 1)[0]
    assert {line.split("**")[1] for line in listed.splitlines()} == offered
    assert {"schedule", "web_fetch", "set_timezone", "remember"} <= offered
    assert "bash" not in offered and "**bash**" not in sent["system"]  # no sandbox here
    assert "web_search" not in offered and "web_search" not in sent["system"]  # no Brave key


async def test_an_unfilled_user_md_is_not_sent_and_a_filled_one_is(bundled):
    runtime, route, workspace = bundled
    unfilled = (await asked(runtime, route))["system"]
    assert "About my owner" not in unfilled and "Lyon" not in unfilled

    user_md = workspace / "USER.md"
    user_md.write_text(user_md.read_text() + "\n- Name: Grace\n- Prefers metric units\n")
    filled = (await asked(runtime, route))["system"]
    assert "- Name: Grace" in filled and "About my owner" in filled
    assert "<!--" not in filled and "Lyon" not in filled  # the template's hints stay out
