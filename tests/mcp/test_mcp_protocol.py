"""Ash as an MCP server at the protocol's edges: Origin, methods, JSON-RPC envelopes, unknown tools,
batches and protocol versions. Raw requests against a real `ash serve` (granian) and raw lines
against a real `ash mcp serve`, then the SDK's own client over both transports."""

from __future__ import annotations

import asyncio
import json
from contextlib import asynccontextmanager

import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from lib.mcp.http import origin_allowed
from tests.mcp.conftest import ash, new_token
from tests.support.faults import ASH, AshServer, server_env, write_config

ALICE = "1001"
ACCEPT = "application/json, text/event-stream"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
}
# A line or a body and the JSON-RPC error it must get: (code, id).
MALFORMED = [
    pytest.param(b"{not json", (-32700, None), id="not-json"),
    pytest.param(b"42", (-32600, None), id="not-an-object"),
    pytest.param(b'{"id": 3, "method": "tools/list"}', (-32600, 3), id="no-jsonrpc"),
    pytest.param(b'{"jsonrpc": "1.0", "id": 3, "method": "tools/list"}', (-32600, 3), id="jsonrpc-1.0"),
    pytest.param(b'{"jsonrpc": "2.0", "id": null, "method": "tools/list"}', (-32600, None), id="id-null"),
    pytest.param(b'{"jsonrpc": "2.0", "id": true, "method": "tools/list"}', (-32600, None), id="id-bool"),
    pytest.param(b'{"jsonrpc": "2.0", "id": 4, "method": 7}', (-32600, 4), id="method-not-string"),
    pytest.param(b'{"jsonrpc": "2.0", "id": 5, "method": "ping", "params": "x"}', (-32600, 5), id="params-string"),
    pytest.param(b'{"jsonrpc": "2.0", "id": 6, "method": "ping", "params": ["x"]}', (-32602, 6), id="params-array"),
    pytest.param(b'{"jsonrpc": "2.0", "id": 7}', (-32600, None), id="neither-request-nor-response"),
    pytest.param(b'[{"jsonrpc": "2.0", "id": 8, "method": "ping"}]', (-32600, None), id="batch"),
    pytest.param(b"[]", (-32600, None), id="empty-batch"),
]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One `ash serve` for the module, and a token of Alice's for it."""
    home = tmp_path_factory.mktemp("mcp-protocol") / "ash-home"
    write_config(home, allowed=[int(ALICE)])
    token = new_token(home, ALICE, "--name", "protocol")
    server = AshServer(home, server_env(home, None)).start()
    yield server, token
    server.stop()


def post(served, body: bytes | dict, **headers: str) -> httpx.Response:
    server, token = served
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    sent = {"Authorization": f"Bearer {token}", "Accept": ACCEPT, "Content-Type": "application/json", **headers}
    return server.http.post("/mcp", content=content, headers=sent)


def error_of(answer: httpx.Response) -> tuple[int, object]:
    payload = answer.json()
    return payload["error"]["code"], payload["id"]


@asynccontextmanager
async def sdk_client(served, mode: str = "auto", **headers: str):
    """The SDK's client over Streamable HTTP with Alice's token (and any extra headers)."""
    server, token = served
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}", **headers}, timeout=60) as http,
        Client(streamable_http_client(f"http://127.0.0.1:{server.port}/mcp", http_client=http), mode=mode) as client,
    ):
        yield client


@pytest.mark.parametrize(
    ("origin", "host", "allowed"),
    [
        (None, "ash.example.com", True),  # not a browser
        ("https://ash.example.com", "ash.example.com", True),  # a page of this server, behind TLS
        ("http://ash.example.com:8080", "ash.example.com:8080", True),
        ("http://localhost:6274", "ash.example.com", True),  # a local tool's page (MCP Inspector)
        ("http://127.0.0.1:3000", "ash.example.com", True),
        ("http://[::1]:3000", "ash.example.com", True),
        ("https://evil.example", "ash.example.com", False),
        ("https://ash.example.com.evil.example", "ash.example.com", False),
        ("https://ash.example.com:444", "ash.example.com", False),
        ("http://ash.example.com", "ash.example.com:8080", False),
        ("null", "ash.example.com", False),  # sandboxed frames and file pages
        ("file://", "ash.example.com", False),
        ("https://ash.example.com:99999", "ash.example.com", False),
    ],
)
def test_which_origins_may_reach_the_server(origin, host, allowed):
    assert origin_allowed(origin, host) is allowed


def test_a_foreign_origin_gets_403_even_with_a_valid_token(served):
    for origin in ("https://evil.example", "null"):
        answer = post(served, INITIALIZE, Origin=origin)
        assert answer.status_code == 403, origin
        assert "result" not in answer.text
    # The same request from this server's own pages, or from loopback, is served.
    assert post(served, INITIALIZE, Origin="https://ash.example.com", Host="ash.example.com").status_code == 200
    assert post(served, INITIALIZE, Origin="http://localhost:6274").status_code == 200


async def test_the_sdk_client_from_a_foreign_origin_is_refused(served):
    with pytest.raises(ExceptionGroup) as refused:
        async with sdk_client(served, Origin="https://evil.example") as client:
            await client.list_tools()
    assert refused.group_contains(MCPError)


def test_get_and_delete_get_405_and_allow_post_instead_of_a_silent_stream(served):
    server, token = served
    headers = {"Authorization": f"Bearer {token}", "Accept": "text/event-stream"}
    for method in ("GET", "DELETE"):
        # Answered at once: before, GET opened an event stream that never sent anything.
        answer = server.http.request(method, "/mcp", headers=headers, timeout=60)
        assert answer.status_code == 405, method
        assert answer.headers["allow"] == "POST"
        assert "server-to-client stream" in answer.json()["detail"]


@pytest.mark.parametrize(("body", "expected"), MALFORMED)
def test_a_malformed_envelope_gets_its_json_rpc_error(served, body, expected):
    answer = post(served, body)
    assert answer.status_code == 400
    assert error_of(answer) == expected


def test_an_unknown_tool_is_invalid_params_not_a_tool_result(served):
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "nope", "arguments": {}}}
    answer = post(served, call, **{"MCP-Protocol-Version": "2025-06-18"})
    assert answer.status_code == 200
    assert answer.json() == {"jsonrpc": "2.0", "id": 2, "error": {"code": -32602, "message": "Unknown tool: nope"}}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_an_unknown_tool_raises_in_the_sdk_client(served, mode):
    async with sdk_client(served, mode=mode) as client:
        with pytest.raises(MCPError) as raised:
            await client.call_tool("nope", {})
        assert raised.value.error.code == -32602
        assert not (await client.call_tool("list_memories", {})).is_error  # the session goes on


def test_2025_03_26_is_not_offered(served):
    # A client asking for it is answered with the newest handshake version, as the lifecycle allows.
    asked = {**INITIALIZE, "params": {**INITIALIZE["params"], "protocolVersion": "2025-03-26"}}
    answer = post(served, asked)
    assert answer.status_code == 200
    assert answer.json()["result"]["protocolVersion"] == LATEST_HANDSHAKE_VERSION != "2025-03-26"
    # Versions it does offer are answered as asked.
    assert post(served, INITIALIZE).json()["result"]["protocolVersion"] == "2025-06-18"
    # A request claiming 2025-03-26 in its header gets 400, as the transport spec requires.
    ping = {"jsonrpc": "2.0", "id": 3, "method": "ping"}
    assert post(served, ping, **{"MCP-Protocol-Version": "2025-03-26"}).status_code == 400
    answered = post(served, ping, **{"MCP-Protocol-Version": "2025-06-18"})
    assert answered.json() == {"jsonrpc": "2.0", "id": 3, "result": {}}


def test_notifications_and_responses_are_accepted_with_202(served):
    assert post(served, {"jsonrpc": "2.0", "method": "notifications/initialized"}).status_code == 202


async def read_answer(proc) -> dict:
    """The next line the server writes (a generous ceiling: `import mcp` is slow on a busy machine)."""
    line = await asyncio.wait_for(proc.stdout.readline(), timeout=120)
    assert line, "the server closed stdout"
    return json.loads(line)


async def test_stdio_answers_every_bad_line_and_unknown_tools(ash_home):
    write_config(ash_home, allowed=[int(ALICE)])
    ash(ash_home, "db", "migrate")
    env = server_env(ash_home, None)
    proc = await asyncio.create_subprocess_exec(
        str(ASH), "mcp", "serve", "--user", ALICE, env=env,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for param in MALFORMED:
            body, expected = param.values
            proc.stdin.write(body + b"\n")
            await proc.stdin.drain()
            answer = await read_answer(proc)
            assert (answer["error"]["code"], answer["id"]) == expected, param.id
        proc.stdin.write(b"\n")  # a blank line is nobody's message: no answer
        asked = {**INITIALIZE, "params": {**INITIALIZE["params"], "protocolVersion": "2025-03-26"}}
        lines = [
            asked,
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "nope", "arguments": {}}},
        ]
        proc.stdin.write(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
        await proc.stdin.drain()
        initialized = await read_answer(proc)
        assert initialized["id"] == 1 and initialized["result"]["protocolVersion"] == LATEST_HANDSHAKE_VERSION
        assert await read_answer(proc) == {
            "jsonrpc": "2.0",
            "id": 2,
            "error": {"code": -32602, "message": "Unknown tool: nope"},
        }
    finally:
        proc.stdin.close()
        await asyncio.wait_for(proc.wait(), timeout=60)
    assert proc.returncode == 0


async def test_stdio_unknown_tool_raises_in_the_sdk_client(ash_home):
    write_config(ash_home, allowed=[int(ALICE)])
    ash(ash_home, "db", "migrate")
    env = {"ASH_HOME": str(ash_home)}
    params = StdioServerParameters(command=str(ASH), args=["mcp", "serve", "--user", ALICE, "--read-only"], env=env)
    async with Client(params) as client:
        for name in ("nope", "remember"):  # a read-only server has no remember
            with pytest.raises(MCPError) as raised:
                await client.call_tool(name, {"content": "x"})
            assert raised.value.error.code == -32602
        assert not (await client.call_tool("list_memories", {})).is_error
