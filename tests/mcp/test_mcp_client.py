"""Outside MCP servers as tools: a stub server written with the SDK (tests/mcp/stub_server.py),
reached over stdio and Streamable HTTP, called by the stub model through a real turn."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

import lib.tools.registry as registry
from lib.agent import TurnInput, run_turn
from lib.commands.cli import cli
from lib.config import load_settings
from lib.tools import mcp_client, mcp_sessions
from lib.tools.base import ToolContext
from tests.mcp.conftest import PYTHON, STUB, wait_for_port
from tests.support.agent import (
    ANTHROPIC_MESSAGES,
    RecordingSink,
    configured_runtime,
    request_json,
    sse_response,
    tool_calls,
)
from tests.support.faults import AshServer, free_port, server_env, wait_until, write_config

OWNER = "1001"


def stdio_config(name: str = "stub", extra: str = "", args: tuple[str, ...] = ()) -> str:
    # start_timeout is a ceiling, not a measure: `import mcp` alone takes 3.4 s on a busy 2-core machine.
    return f"""
[mcp.servers.{name}]
command = "{PYTHON}"
args = {json.dumps([str(STUB), "stdio", *args])}
env = {{ STUB_TOKEN = "${{STUB_SECRET}}" }}
start_timeout = 120
{extra}
"""


def config(servers: str) -> str:
    return f'owner = {OWNER}\n[embeddings]\nprovider = "none"\n{servers}'


async def model_calls(runtime, httpx2_mock, name: str, tool_input: dict):
    """One turn in which the stub model calls `name`, then answers; returns the model route and result."""
    import httpx

    route = httpx2_mock.post(ANTHROPIC_MESSAGES).mock(
        side_effect=[
            httpx.Response(200, content=tool_calls((name, tool_input)), headers={"content-type": "text/event-stream"}),
            sse_response("anthropic", "stream_text.sse"),
        ]
    )
    turn = TurnInput(provider="telegram", chat_id=OWNER, user_id=OWNER, text="use the stub")
    result = await run_turn(runtime, turn, RecordingSink())
    return route, result


@pytest.fixture(autouse=True)
def fresh_sessions(monkeypatch):
    """Each test lists its servers afresh and leaves no session (nor server process) behind."""
    monkeypatch.setattr(mcp_client, "_LISTED", {})
    yield
    mcp_client.close_sessions()


def context() -> ToolContext:
    return ToolContext(user_id=OWNER, chat_id=OWNER, session_id=None, settings=None)


def tool_named(runtime, name: str):
    (tool,) = [t for t in registry.available_tools(runtime.settings) if t.name == name]
    return tool


async def call(runtime, name: str, arguments: dict | None = None) -> str:
    result = await tool_named(runtime, name).execute(arguments or {}, context())
    assert not result.is_error, result.output
    return result.output


def processes_with(marker: str) -> list[int]:
    """Live processes whose command line holds `marker` (a zombie's is empty: it is dead)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def tool_result_sent(route) -> str:
    """The text of the tool result the model was sent in its latest request."""
    last = request_json(route.calls[-1])["messages"][-1]
    (block,) = [b for b in last["content"] if b["type"] == "tool_result"]
    content = block["content"]
    return content if isinstance(content, str) else "".join(c.get("text", "") for c in content)


@pytest.fixture
def stdio_runtime(ash_home, monkeypatch, sleeps):
    monkeypatch.setenv("STUB_SECRET", "stub-secret-value")
    runtime = configured_runtime(ash_home, monkeypatch, config(stdio_config()))
    yield runtime
    runtime.db.close()


@pytest.fixture
def impatient_runtime(ash_home, monkeypatch, sleeps):
    """call_timeout 1.5 s: short, for the tool that never answers (the server is started before)."""
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


async def test_hanging_tool_times_out_and_the_session_goes_on(impatient_runtime, httpx2_mock):
    before = await call(impatient_runtime, "stub__pid")  # started (and listed) before the clock matters
    route, result = await model_calls(impatient_runtime, httpx2_mock, "stub__hang", {})

    # The tool sleeps for an hour: the turn ending at all is the turn not waiting for it.
    assert "did not answer within 1.5 s" in tool_result_sent(route)
    assert result.ok
    # The call was given up, not the server: the same process answers the next call.
    assert await call(impatient_runtime, "stub__pid") == before


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
        wait_for_port(port, proc)
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
        mcp_sessions.resolve("Bearer ${MISSING_ONE}", {})
    assert mcp_sessions.resolve("a ${X} b ${Y}", {"X": "1", "Y": "2"}) == "a 1 b 2"


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


async def test_one_session_per_server_keeps_its_state_between_calls(stdio_runtime, httpx2_mock):
    # Two turns, one server process: a server that keeps state between calls keeps it.
    route, _ = await model_calls(stdio_runtime, httpx2_mock, "stub__count", {})
    first = tool_result_sent(route)
    route, _ = await model_calls(stdio_runtime, httpx2_mock, "stub__count", {})

    assert "\n1\n" in first and "\n2\n" in tool_result_sent(route)


async def test_a_server_killed_between_calls_is_started_again_and_answers(stdio_runtime, caplog):
    assert await call(stdio_runtime, "stub__count") == "1"
    first = int(await call(stdio_runtime, "stub__pid"))
    os.kill(first, signal.SIGKILL)

    # The next call finds it dead (the ping before every call), starts a new one and is answered there.
    assert await call(stdio_runtime, "stub__count") == "1"
    second = int(await call(stdio_runtime, "stub__pid"))
    assert second != first
    assert "MCP server stub stopped answering; starting it again" in caplog.text


async def test_a_call_whose_server_dies_under_it_is_not_repeated(stdio_runtime, tmp_path):
    note = tmp_path / "calls.txt"
    assert await call(stdio_runtime, "stub__count") == "1"

    died = await tool_named(stdio_runtime, "stub__die").execute({"note": str(note)}, context())

    # The server may have acted on it (here: it wrote its line), so it is reported, not sent again.
    assert died.is_error and "The MCP server stub failed" in died.output
    assert note.read_text() == "called\n"
    # The next call starts a new server.
    assert await call(stdio_runtime, "stub__count") == "1"


async def test_closing_the_sessions_leaves_no_server_process(ash_home, monkeypatch, sleeps):
    # --linger: this server ignores the end of its stdin, so only the SDK's SIGTERM ends it.
    marker = f"ash-test-{uuid.uuid4().hex}"
    monkeypatch.setenv("STUB_SECRET", "x")
    runtime = configured_runtime(ash_home, monkeypatch, config(stdio_config(args=("--linger", marker))))
    try:
        pid = int(await call(runtime, "stub__pid"))
        assert processes_with(marker) == [pid]

        mcp_client.close_sessions()

        assert processes_with(marker) == []
    finally:
        runtime.db.close()


def test_ash_chat_closes_its_server_processes(ash_home, monkeypatch, httpx2_mock, sleeps):
    import httpx

    marker = f"ash-test-{uuid.uuid4().hex}"
    monkeypatch.setenv("STUB_SECRET", "x")
    configured_runtime(ash_home, monkeypatch, config(stdio_config(args=("--linger", marker)))).db.close()
    route = httpx2_mock.post(ANTHROPIC_MESSAGES).mock(
        side_effect=[
            httpx.Response(200, content=tool_calls(("stub__pid", {})), headers={"content-type": "text/event-stream"}),
            sse_response("anthropic", "stream_text.sse"),
        ]
    )

    result = CliRunner().invoke(cli, ["chat", "which process answers?"])

    assert result.exit_code == 0, result.output
    served_by = tool_result_sent(route)
    assert any(line.strip().isdigit() for line in served_by.splitlines()), served_by
    assert processes_with(marker) == []


def test_ash_serve_closes_its_server_processes_when_it_stops(tmp_path):
    marker = f"ash-test-{uuid.uuid4().hex}"
    home = tmp_path / "served"
    servers = f"""
[mcp.servers.stub]
command = "{PYTHON}"
args = {json.dumps([str(STUB), "stdio", "--linger", marker])}
start_timeout = 120
"""
    write_config(home, extra=servers)
    server = AshServer(home, server_env(home, None)).start()
    try:
        # Started a moment after start-up, off the first answers, and kept.
        wait_until(lambda: processes_with(marker), timeout=120, what="the MCP server to be started")
    finally:
        server.stop()
    assert server.proc.returncode == 0, server.output()
    assert processes_with(marker) == []


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


async def test_an_aliased_tool_is_called_by_its_own_name(stdio_runtime, httpx2_mock):
    aliases = mcp_client.api_names("stub", ["files.read"])
    route, result = await model_calls(stdio_runtime, httpx2_mock, aliases["files.read"], {"path": "/srv/notes.txt"})

    offered = {t["name"]: t for t in request_json(route.calls[0])["tools"]}
    assert (
        aliases["files.read"] in offered
        and "[MCP server stub, tool files.read]" in offered[aliases["files.read"]]["description"]
    )
    assert any(name.startswith("stub__a_tool_whose_name") and len(name) <= 64 for name in offered)
    assert result.tool_calls == [aliases["files.read"]]
    assert "read /srv/notes.txt" in tool_result_sent(route)
