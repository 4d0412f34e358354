"""Outside MCP servers as tools: a stub server written with the SDK (tests/mcp/stub_server.py),
reached over stdio and Streamable HTTP, called by the stub model through a real turn."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

import lib.tools.registry as registry
from lib.agent.contract import TurnInput
from lib.agent.turn import run_turn
from lib.config import load_settings
from lib.tools import mcp_client
from lib.tools.base import ToolContext
from tests.mcp.conftest import PYTHON, STUB, wait_for_port
from tests.support.agent import (
    ANTHROPIC_MESSAGES,
    RecordingSink,
    body,
    configured_runtime,
    message_as_sse,
    request_json,
    sse_response,
)
from tests.support.faults import free_port

OWNER = "1001"


def stdio_config(name: str = "stub", extra: str = "") -> str:
    return f"""
[mcp.servers.{name}]
command = "{PYTHON}"
args = ["{STUB}", "stdio"]
env = {{ STUB_TOKEN = "${{STUB_SECRET}}" }}
{extra}
"""


def config(servers: str) -> str:
    return f'owner = {OWNER}\n[embeddings]\nprovider = "none"\n{servers}'


def tool_call(name: str, tool_input: dict) -> bytes:
    """The model's answer: one call of `name`."""
    message = body("anthropic", "messages_tool_use.json")
    message["content"] = [{"type": "tool_use", "id": "toolu_mcp_1", "name": name, "input": tool_input}]
    message["stop_reason"] = "tool_use"
    return message_as_sse(message)


async def model_calls(runtime, httpx2_mock, name: str, tool_input: dict):
    """One turn in which the stub model calls `name`, then answers; returns the model route and result."""
    import httpx

    route = httpx2_mock.post(ANTHROPIC_MESSAGES).mock(
        side_effect=[
            httpx.Response(200, content=tool_call(name, tool_input), headers={"content-type": "text/event-stream"}),
            sse_response("anthropic", "stream_text.sse"),
        ]
    )
    turn = TurnInput(provider="telegram", chat_id=OWNER, user_id=OWNER, text="use the stub")
    result = await run_turn(runtime, turn, RecordingSink())
    return route, result


def tool_result_sent(route) -> str:
    """The text of the tool result the model was sent in its second request."""
    last = request_json(route.calls[1])["messages"][-1]
    (block,) = [b for b in last["content"] if b["type"] == "tool_result"]
    content = block["content"]
    return content if isinstance(content, str) else "".join(c.get("text", "") for c in content)


@pytest.fixture
def stdio_runtime(ash_home, monkeypatch, sleeps):
    monkeypatch.setenv("STUB_SECRET", "stub-secret-value")
    runtime = configured_runtime(ash_home, monkeypatch, config(stdio_config(extra="call_timeout = 1.5")))
    yield runtime
    runtime.db.close()


async def test_stdio_server_tool_is_offered_as_name__tool_and_its_result_reaches_the_model(stdio_runtime, httpx2_mock):
    route, result = await model_calls(stdio_runtime, httpx2_mock, "stub__shout", {"text": "hello"})

    offered = {t["name"]: t for t in request_json(route.calls[0])["tools"]}
    assert {"stub__shout", "stub__environment", "stub__hang"} <= set(offered)
    assert offered["stub__shout"]["input_schema"]["properties"]["text"]["type"] == "string"
    assert result.tool_calls == ["stub__shout"]
    sent = tool_result_sent(route)
    assert "HELLO!" in sent
    assert '<tool_output tool="stub__shout">' in sent  # framed as data, like every tool output


async def test_hanging_server_times_out_without_holding_the_turn(stdio_runtime, httpx2_mock):
    started = time.monotonic()
    route, result = await model_calls(stdio_runtime, httpx2_mock, "stub__hang", {})
    took = time.monotonic() - started

    assert "did not answer within 1.5 s" in tool_result_sent(route)
    assert result.ok
    # call_timeout is 1.5 s; closing a hung stdio server takes the SDK 2 s more, which the turn must not wait for.
    assert took < 1.5 + 1.5, took


async def test_stdio_server_sees_only_its_own_env_plus_path_and_home(ash_home, monkeypatch, sleeps):
    monkeypatch.setenv("STUB_SECRET", "stub-secret-value")
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "123:telegram-secret")
    monkeypatch.setenv("ASH_ADMIN_TOKEN", "admin-secret")
    monkeypatch.setenv("USER", "someone")
    runtime = configured_runtime(ash_home, monkeypatch, config(stdio_config()))  # sets the LLM keys too
    try:
        (tool,) = [t for t in registry.available_tools(runtime.settings) if t.name == "stub__environment"]
        context = ToolContext(user_id=OWNER, chat_id=OWNER, session_id=None, settings=runtime.settings)
        result = await tool.execute({}, context)
    finally:
        runtime.db.close()

    seen = json.loads(result.output)
    # Python itself sets LC_CTYPE when the locale is C (PEP 538): not something Ash passed on.
    seen.pop("LC_CTYPE", None)
    assert seen == {"PATH": os.environ["PATH"], "HOME": os.environ["HOME"], "STUB_TOKEN": "stub-secret-value"}
    assert result.metadata["untrusted"] is True


async def test_output_is_capped(ash_home, monkeypatch, sleeps):
    monkeypatch.setenv("STUB_SECRET", "x")
    settings_text = config(stdio_config(extra="output_limit = 100"))
    runtime = configured_runtime(ash_home, monkeypatch, settings_text)
    try:
        (tool,) = [t for t in registry.available_tools(runtime.settings) if t.name == "stub__long_output"]
        context = ToolContext(user_id=OWNER, chat_id=OWNER, session_id=None, settings=runtime.settings)
        result = await tool.execute({"characters": 5000}, context)
    finally:
        runtime.db.close()
    assert result.output.startswith("x" * 100 + "\n[output cut: 4900 more characters]")


@pytest.fixture
def http_stub():
    """The stub server over Streamable HTTP, wanting `Bearer http-stub-token`."""
    port = free_port()
    proc = subprocess.Popen([PYTHON, str(STUB), "http", str(port), "http-stub-token"])
    try:
        wait_for_port(port)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


async def test_http_server_with_a_header_from_the_environment(ash_home, monkeypatch, sleeps, httpx2_mock, http_stub):
    monkeypatch.setenv("STUB_HTTP_TOKEN", "http-stub-token")
    servers = f"""
[mcp.servers.web]
url = "{http_stub}"
headers = {{ Authorization = "Bearer ${{STUB_HTTP_TOKEN}}" }}

[mcp.servers.broken]
command = "/nonexistent/mcp-server"
start_timeout = 5
"""
    runtime = configured_runtime(ash_home, monkeypatch, config(servers))
    try:
        httpx2_mock.route(host="127.0.0.1").pass_through()  # the MCP server's own HTTP
        route, _ = await model_calls(runtime, httpx2_mock, "web__shout", {"text": "over http"})
    finally:
        runtime.db.close()
    assert "OVER HTTP!" in tool_result_sent(route)
    offered = {t["name"] for t in request_json(route.calls[0])["tools"]}
    assert "web__shout" in offered and not any(name.startswith("broken__") for name in offered)


async def test_a_server_that_fails_to_start_is_logged_and_skipped(ash_home, monkeypatch, caplog):
    text = config('[mcp.servers.broken]\ncommand = "/nonexistent/mcp-server"\nstart_timeout = 5\n')
    (ash_home / "config.toml").parent.mkdir(parents=True, exist_ok=True)
    (ash_home / "config.toml").write_text(text)
    monkeypatch.setattr(mcp_client, "_LISTED", {})  # asked afresh, not from an earlier test's answer
    settings = load_settings()
    assert [t.name for t in mcp_client.mcp_tools(settings)] == []
    assert "MCP server broken could not be started and is skipped" in caplog.text


def test_missing_variable_is_named_and_never_its_value():
    with pytest.raises(ValueError, match="MISSING_ONE is not set"):
        mcp_client.resolve("Bearer ${MISSING_ONE}", {})
    assert mcp_client.resolve("a ${X} b ${Y}", {"X": "1", "Y": "2"}) == "a 1 b 2"


def test_doctor_lists_each_server_and_its_tools(ash_home, monkeypatch):
    from lib.commands.doctor_mcp import mcp_checks

    monkeypatch.setenv("STUB_SECRET", "x")
    monkeypatch.setattr(mcp_client, "_LISTED", {})
    broken = '[mcp.servers.broken]\ncommand = "/nonexistent/mcp-server"\nstart_timeout = 5\n'
    ash_home.mkdir(parents=True, exist_ok=True)
    (ash_home / "config.toml").write_text(config(stdio_config() + broken))
    checks = {c.name: c for c in mcp_checks(load_settings())}

    assert checks["mcp server stub"].status == "ok"
    assert "stub__shout" in checks["mcp server stub"].detail and "stub__hang" in checks["mcp server stub"].detail
    assert checks["mcp server broken"].status == "warn"
    assert "not started, skipped" in checks["mcp server broken"].detail


@pytest.mark.parametrize("server", ["stub", "s" * 32])
def test_names_the_model_apis_refuse_get_stable_readable_aliases(server):
    tools = ["shout", "files.read", "files/read", "a_tool_whose_name_is_far_too_long_to_fit_in_sixty_four_characters"]
    names = mcp_client.api_names(server, tools)

    assert names == mcp_client.api_names(server, reversed(tools))  # stable, whatever the order
    assert names["shout"] == f"{server}__shout"  # a name the APIs accept stays as it is
    assert len(set(names.values())) == len(tools)  # unique, even where two names read alike
    for alias in names.values():
        assert mcp_client.TOOL_NAME.fullmatch(alias), alias
        assert alias.startswith(f"{server}__")
    assert names["files.read"].startswith(f"{server}__files_read_")
    assert names["a_tool_whose_name_is_far_too_long_to_fit_in_sixty_four_characters"].startswith(f"{server}__a_tool_")


async def test_an_aliased_tool_is_called_by_its_own_name(ash_home, monkeypatch, sleeps, httpx2_mock):
    monkeypatch.setenv("STUB_SECRET", "x")
    monkeypatch.setattr(mcp_client, "_LISTED", {})
    runtime = configured_runtime(ash_home, monkeypatch, config(stdio_config()))
    aliases = mcp_client.api_names("stub", ["files.read"])
    try:
        route, result = await model_calls(runtime, httpx2_mock, aliases["files.read"], {"path": "/srv/notes.txt"})
    finally:
        runtime.db.close()

    offered = {t["name"]: t for t in request_json(route.calls[0])["tools"]}
    assert (
        aliases["files.read"] in offered
        and "[MCP server stub, tool files.read]" in offered[aliases["files.read"]]["description"]
    )
    assert any(name.startswith("stub__a_tool_whose_name") and len(name) <= 64 for name in offered)
    assert result.tool_calls == [aliases["files.read"]]
    assert "read /srv/notes.txt" in tool_result_sent(route)
