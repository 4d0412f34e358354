"""Ash's memory as an MCP server, driven by the SDK's own client: over Streamable HTTP against a
real `ash serve` (granian) and over stdio against `ash mcp serve`, on real SQLite files."""

from __future__ import annotations

import json
from contextlib import asynccontextmanager

import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from lib.config import load_settings
from lib.db import connect
from lib.memory import api, knowledge, store
from lib.migrations import migrate
from tests.mcp.conftest import ash, new_token
from tests.support.faults import ASH, OWNER, AshServer, server_env, write_config
from tests.support.memory_surfaces import say

ALICE, BOB = "1001", "2002"
GROUP = "-100777"
ALL_TOOLS = {"recall", "remember", "forget", "list_memories", "search_history", "export"}
READING_TOOLS = {"recall", "list_memories", "search_history", "export"}


def seed(home) -> None:
    """Bob's private facts and words; a group where Alice and Bob both spoke; Alice's notes."""
    settings = load_settings()
    conn = connect(settings.database_path)
    migrate(conn)
    say(conn, settings, BOB, "My locker combination is marmalade 4711")
    knowledge.add(conn, settings, "Bob's passport number is P-998877", owner_user_id=BOB, source="tool")
    # A group's transcript is owned by the group (lib/memory/scope.py), whoever spoke.
    say(conn, settings, BOB, "Group chat: my zebra costume is ready", chat_id=GROUP, chat_type="group")
    conn.execute(
        "UPDATE messages SET owner_user_id = ? WHERE session_id IN (SELECT id FROM sessions WHERE chat_id = ?)",
        (f"chat:{GROUP}", GROUP),
    )
    store.set_notes(conn, ALICE, "- Alice is a chemist in Lyon")
    conn.close()


@pytest.fixture
def home(ash_home):
    write_config(ash_home, allowed=[int(ALICE), int(BOB)])
    seed(ash_home)
    return ash_home


@pytest.fixture
def server(home):
    running = AshServer(home, server_env(home, None)).start()
    yield running
    running.stop()


@asynccontextmanager
async def http_client(url: str, token: str):
    """The SDK's client over Streamable HTTP with a bearer token."""
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


def text(result) -> str:
    assert not result.is_error, result.content
    return result.content[0].text


async def test_http_remember_recall_forget_and_isolation(home, server):
    url = f"http://127.0.0.1:{server.port}/mcp"
    # Never enabled: no token was ever made.
    assert server.http.post("/mcp", json={}).status_code == 403
    alice = new_token(home, ALICE, "--name", "laptop")
    assert alice.startswith("ashmcp_")

    async with http_client(url, alice) as client:
        assert {t.name for t in (await client.list_tools()).tools} == ALL_TOOLS
        saved = json.loads(text(await client.call_tool("remember", {"content": "Alice grows saffron on her balcony"})))
        found = json.loads(text(await client.call_tool("recall", {"query": "saffron balcony"})))
        assert [f["id"] for f in found if f["kind"] == "memory"] == [saved["id"]]

        # Bob's memory and the group's transcript are out of reach, whatever is asked.
        for tool in ("recall", "search_history"):
            for query in ("marmalade locker combination", "passport P-998877", "zebra costume"):
                assert json.loads(text(await client.call_tool(tool, {"query": query}))) == []
        exported = text(await client.call_tool("export", {}))
        assert "saffron" in exported and "Lyon" in exported
        for secret in ("marmalade", "P-998877", "zebra"):
            assert secret not in exported
        listed = json.loads(text(await client.call_tool("list_memories", {"limit": 50})))
        assert [m["content"] for m in listed] == ["Alice grows saffron on her balcony"]
        # Forgetting Bob's entry by its id is refused: it is not Alice's.
        bob_entry = knowledge.list_entries(connect(load_settings().database_path), owner_user_id=BOB)[0]
        refused = await client.call_tool("forget", {"id": bob_entry.id})
        assert refused.is_error

        notes = await client.read_resource("ash://profile/notes")
        assert "chemist in Lyon" in notes.contents[0].text

        forgot = json.loads(text(await client.call_tool("forget", {"id": saved["id"]})))
        assert forgot["deleted_memory_ids"] == [saved["id"]]

    # Gone for Telegram turns too: the retrieval a turn in Alice's private chat runs finds nothing.
    settings = load_settings()
    conn = connect(settings.database_path)
    assert knowledge.get(conn, saved["id"]) is None
    assert api.retrieve_context(conn, settings, user_id=ALICE, query="saffron balcony") == []
    audit = conn.execute("SELECT actor, action FROM audit_log WHERE actor LIKE 'mcp:%' ORDER BY id").fetchall()
    assert audit == [("mcp:laptop", "memory_add"), ("mcp:laptop", "forget_memory")]
    # Only the token's hash is stored; the server never logged it.
    assert alice not in {r[0] for r in conn.execute("SELECT token_hash FROM mcp_tokens")}
    assert alice not in server.output()
    conn.close()


async def test_bob_token_never_sees_alice_and_read_only_token_cannot_write(home, server):
    url = f"http://127.0.0.1:{server.port}/mcp"
    alice = new_token(home, ALICE)
    async with http_client(url, alice) as client:
        await client.call_tool("remember", {"content": "Alice's bike lock code is 2468"})
    bob = new_token(home, BOB, "--read-only", "--name", "bob-reader")
    async with http_client(url, bob) as client:
        assert {t.name for t in (await client.list_tools()).tools} == READING_TOOLS
        assert json.loads(text(await client.call_tool("recall", {"query": "bike lock code 2468"}))) == []
        found = json.loads(text(await client.call_tool("recall", {"query": "passport number"})))
        assert [f["content"] for f in found] == ["Bob's passport number is P-998877"]
        # A read-only token's server has no `remember`: calling it is an unknown tool (-32602).
        with pytest.raises(MCPError, match="Unknown tool: remember"):
            await client.call_tool("remember", {"content": "should not be stored"})
    conn = connect(load_settings().database_path)
    assert conn.execute("SELECT count(*) FROM memories WHERE content = 'should not be stored'").fetchone()[0] == 0
    conn.close()


async def test_wrong_revoked_and_expired_tokens_get_401(home, server):
    url = f"http://127.0.0.1:{server.port}/mcp"
    alice = new_token(home, ALICE, "--name", "phone")
    expiring = new_token(home, ALICE, "--expires", "1")
    post = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    for header in ("Bearer ashmcp_wrong", "Bearer " + alice[:-1], "Basic " + alice, "", alice):
        answer = server.http.post("/mcp", json=post, headers={"Authorization": header} if header else {})
        assert answer.status_code == 401, header
        assert answer.headers["www-authenticate"] == "Bearer"

    async with http_client(url, alice) as client:
        await client.list_tools()
        (token_id,) = [
            line.split()[0][1:] for line in ash(home, "mcp", "token", "list").splitlines() if "phone" in line
        ]
        ash(home, "mcp", "token", "revoke", token_id)
        with pytest.raises(MCPError):
            await client.list_tools()  # the same client, one call later
    assert "revoked" in ash(home, "mcp", "token", "list")

    conn = connect(load_settings().database_path)
    conn.execute("UPDATE mcp_tokens SET expires_at = '2000-01-01T00:00:00.000Z' WHERE expires_at IS NOT NULL")
    conn.close()
    headers = {"Authorization": f"Bearer {expiring}", "Accept": "application/json, text/event-stream"}
    assert httpx.post(url, json=post, headers=headers).status_code == 401


def ping(server, token: str) -> int:
    """The status of one MCP ping with this token."""
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
    return server.http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers=headers).status_code


async def test_denying_a_person_stops_their_tokens_and_only_allowed_people_get_in(home, server):
    url = f"http://127.0.0.1:{server.port}/mcp"
    alice = new_token(home, ALICE, "--name", "alice-laptop")
    bob = new_token(home, BOB, "--name", "bob-laptop")
    owner = new_token(home, str(OWNER), "--name", "owner-laptop")
    async with http_client(url, alice) as client:
        await client.call_tool("remember", {"content": "Alice's spare key is under the blue pot"})

        # `ash users deny`: the token stops working at once, mid-session.
        said = ash(home, "users", "deny", ALICE)
        assert "revoked their 1 MCP token(s)" in said
        with pytest.raises(MCPError):
            await client.call_tool("recall", {"query": "spare key"})
        with pytest.raises(MCPError):
            await client.call_tool("remember", {"content": "written after the denial"})
    assert ping(server, alice) == 401
    # The admin API's denial does the same.
    denied = server.http.delete(f"/admin/users/{BOB}/access", headers={"Authorization": "Bearer admin-token-for-tests"})
    assert denied.json()["mcp_tokens_revoked"] == 1
    assert ping(server, bob) == 401
    listed = ash(home, "mcp", "token", "list")
    assert "alice-laptop (user 1001): revoked" in listed and "bob-laptop (user 2002): revoked" in listed

    # A token that is not revoked still acts only for someone who may use Ash: one made for a
    # denied person, or for someone never allowed, is refused; the owner's always works.
    assert ping(server, new_token(home, ALICE, "--name", "after-denial")) == 401
    assert ping(server, new_token(home, "3003", "--name", "stranger")) == 401
    assert ping(server, owner) == 200

    # Allowed again: a new token works; the revoked one stays revoked.
    ash(home, "users", "allow", ALICE)
    assert ping(server, new_token(home, ALICE, "--name", "alice-again")) == 200
    assert ping(server, alice) == 401

    conn = connect(load_settings().database_path)
    audit = conn.execute("SELECT actor, target FROM audit_log WHERE action = 'mcp_token_revoke' ORDER BY id").fetchall()
    memories = conn.execute("SELECT count(*) FROM memories WHERE content = 'written after the denial'").fetchone()[0]
    conn.close()
    assert audit == [("cli", ALICE), ("admin", BOB)]
    assert memories == 0


async def test_stateless_the_server_restarts_between_two_calls(home, server):
    url = f"http://127.0.0.1:{server.port}/mcp"
    alice = new_token(home, ALICE)
    async with http_client(url, alice) as client:
        saved = json.loads(text(await client.call_tool("remember", {"content": "Alice's kiln fires at 1240 C"})))
        server.stop()
        # A new process on the same port: nothing of the first one survives.
        second = AshServer(home, server_env(home, None), name="ash-second")
        second.port, second.http = server.port, httpx.Client(base_url=f"http://127.0.0.1:{server.port}")
        second.start()
        try:
            found = json.loads(text(await client.call_tool("recall", {"query": "kiln fires"})))
        finally:
            second.stop()
    assert [f["id"] for f in found if f["kind"] == "memory"] == [saved["id"]]


async def test_remembering_again_reinforces_instead_of_copying(home, server):
    url = f"http://127.0.0.1:{server.port}/mcp"
    async with http_client(url, new_token(home, ALICE)) as client:
        first = json.loads(text(await client.call_tool("remember", {"content": "Alice is allergic to kiwi"})))
        again = json.loads(text(await client.call_tool("remember", {"content": "alice is allergic to kiwi."})))
    assert again == {"id": first["id"], "reinforced": True}
    conn = connect(load_settings().database_path)
    count, reinforced = conn.execute(
        "SELECT count(*), max(reinforced_count) FROM memories WHERE content LIKE '%kiwi%'"
    ).fetchone()
    conn.close()
    assert (count, reinforced) == (1, 1)


async def test_stdio_ash_mcp_serve(home):
    env = {k: v for k, v in server_env(home, None).items() if k in ("ASH_HOME",)}
    params = StdioServerParameters(command=str(ASH), args=["mcp", "serve", "--user", ALICE], env=env)
    async with Client(params) as client:
        assert {t.name for t in (await client.list_tools()).tools} == ALL_TOOLS
        saved = json.loads(text(await client.call_tool("remember", {"content": "Alice keeps bees in Lyon"})))
        found = json.loads(text(await client.call_tool("recall", {"query": "bees"})))
        assert [f["id"] for f in found if f["kind"] == "memory"] == [saved["id"]]
        assert json.loads(text(await client.call_tool("recall", {"query": "marmalade locker"}))) == []
        await client.call_tool("forget", {"id": saved["id"]})
        assert json.loads(text(await client.call_tool("recall", {"query": "bees"}))) == []
    conn = connect(load_settings().database_path)
    actors = [r[0] for r in conn.execute("SELECT actor FROM audit_log WHERE actor LIKE 'mcp:%'")]
    conn.close()
    assert actors == ["mcp:stdio", "mcp:stdio"]
