"""Upstream faults against a real `ash serve`: Telegram 429 storms and 5xx, an Anthropic 529 storm
that ends in the OpenAI fallback answering, and a Docker host that is down during a bash call.
In every case the user ends up with exactly one answer.
"""

from __future__ import annotations

import json

import pytest

from tests.support.database import inbox_status, query
from tests.support.faults import (
    FIXTURES,
    OWNER,
    AshServer,
    Failure,
    Upstream,
    anthropic_tool_use,
    private_text,
    server_env,
    wait_until,
    write_config,
)
from tests.support.telegram import load

pytestmark = pytest.mark.slow


def _overloaded() -> Failure:
    recorded = json.loads((FIXTURES / "anthropic" / "error_529_overloaded_error.http.json").read_text())
    # retry-after 0: the retry policy is exercised without its backoff slowing the suite.
    return Failure(529, json.loads(recorded["body_text"]), {"x-should-retry": "true", "retry-after": "0"})


@pytest.fixture
def served(ash_home):
    # Bash offered although the engine is down (`enabled = true`), and an OpenAI key, so
    # gpt-4o stands in as the fallback.
    write_config(ash_home, extra="\n[sandbox]\nenabled = true\n")
    with Upstream() as upstream:
        env = server_env(
            ash_home, upstream, DOCKER_HOST="unix:///nonexistent/docker-is-down.sock", OPENAI_API_KEY="sk-openai-test"
        )
        server = AshServer(ash_home, env).start()
        try:
            yield upstream, server
        finally:
            server.stop()


def test_telegram_429_storm_and_5xx_still_deliver_one_answer(served, ash_home):
    upstream, server = served
    flood = Failure(429, load("error_429_retry_after.json"))
    flood.body["parameters"]["retry_after"] = 1
    flood.body["description"] = "Too Many Requests: retry after 1"
    bad_gateway = Failure(502, {"ok": False, "error_code": 502, "description": "Bad Gateway"})
    upstream.fail["sendMessage"] = [flood, bad_gateway, flood]
    upstream.fail["sendChatAction"] = [flood] * 3
    assert server.post_update(private_text(3001, "through the storm")).status_code == 200
    wait_until(lambda: inbox_status(ash_home / "ash.db", 3001) == "done", 90, "the answer after the storm")
    assert upstream.texts_to(OWNER) == ["Echo: through the storm"]
    assert upstream.fail["sendMessage"] == []  # every queued failure was met and retried


def test_llm_529_storm_falls_back_to_openai_and_answers_once(served, ash_home):
    upstream, server = served
    upstream.fail["anthropic"] = [_overloaded() for _ in range(3)]  # llm_retries = 2: three attempts
    assert server.post_update(private_text(3002, "are you there")).status_code == 200
    wait_until(lambda: inbox_status(ash_home / "ash.db", 3002) == "done", 60, "the fallback's answer")
    assert upstream.count("anthropic") == 3
    assert upstream.count("openai") == 1
    assert upstream.texts_to(OWNER) == ["Echo: are you there"]
    usage = query(ash_home / "ash.db", "SELECT provider FROM usage")
    assert [u["provider"] for u in usage] == ["openai"]


def test_docker_host_down_bash_reports_an_error_and_the_turn_still_answers(served, ash_home):
    upstream, server = served
    upstream.anthropic_script = [anthropic_tool_use("bash", {"command": "echo hi"})]
    upstream.reply = lambda text: "The sandbox is unavailable right now."
    assert server.post_update(private_text(3003, "run echo hi")).status_code == 200
    wait_until(lambda: inbox_status(ash_home / "ash.db", 3003) == "done", 60, "the turn after the failed tool")
    assert upstream.texts_to(OWNER) == ["The sandbox is unavailable right now."]
    # The model was told, as a tool error, that the tool could not run.
    second = [body for key, body, _ in upstream.calls if key == "anthropic"][1]
    results = [
        block
        for message in second["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    assert len(results) == 1 and results[0]["is_error"] is True
    runs = query(ash_home / "ash.db", "SELECT tool_name, exit_code, output FROM tool_executions")
    assert [r["tool_name"] for r in runs] == ["bash"]
    assert "docker" in results[0]["content"].lower() or "sandbox" in results[0]["content"].lower()
