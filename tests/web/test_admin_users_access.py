"""The admin API for people: list them, take access away, create a memory for a numeric user id,
and an export that says true/false as the rest of the API does."""

from __future__ import annotations

import pytest
from litestar.testing import TestClient

from lib.config import load_settings
from lib.conversation.access import allow, is_allowed
from lib.db import connect
from lib.memory import knowledge, store
from tests.support.memory_retrieval import open_db
from tests.support.memory_surfaces import make_settings, say

TOKEN = "admin-secret-123"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
OWNER, ALICE, BOB = "1001", "2002", "3003"


@pytest.fixture
def client(ash_home, monkeypatch):
    """The app over a database where the owner and Alice talked, Bob is allowed in config.toml and
    @carol by `ash users allow` (nobody wrote with that name yet)."""
    monkeypatch.setenv("ASH_ADMIN_TOKEN", TOKEN)
    settings = make_settings(
        ash_home, f'[telegram]\nallowed_users = [{ALICE}, {BOB}]\n[embeddings]\nprovider = "none"\n'
    )
    conn = open_db(settings)
    say(conn, settings, OWNER, "Hello", "Hi.")
    say(conn, settings, ALICE, "My favourite tea is genmaicha", "Lovely.")
    store.touch_profile(conn, ALICE, "alice", "Alice")
    store.set_timezone(conn, ALICE, "Europe/Berlin")
    allow(conn, "@carol")
    conn.close()
    from app import app

    with TestClient(app=app) as test_client:
        yield test_client


def people(client) -> dict:
    response = client.get("/admin/users", headers=AUTH)
    assert response.status_code == 200
    body = response.json()
    assert body["count"] == len(body["items"])
    return {p["user_id"] or p["entries"][0]["entry"]: p for p in body["items"]}


@pytest.mark.parametrize(("method", "path"), [("GET", "/admin/users"), ("DELETE", f"/admin/users/{ALICE}/access")])
def test_the_new_routes_need_the_bearer_token(client, method, path):
    assert client.request(method, path).status_code == 401
    assert client.request(method, path, headers={"Authorization": "Bearer wrong"}).status_code == 401


def test_list_shows_everyone_with_their_access(client):
    found = people(client)
    assert found[OWNER]["access"] == "owner"
    alice = found[ALICE]
    assert alice["access"] == "allowed" and alice["username"] == "alice" and alice["timezone"] == "Europe/Berlin"
    assert alice["entries"] == [{"entry": ALICE, "source": "config", "kind": "allow"}]
    assert found[BOB]["access"] == "allowed" and found[BOB]["username"] is None
    assert found["@carol"] == {
        "user_id": None,
        "access": "allowed",
        "entries": [{"entry": "@carol", "source": "cli", "kind": "allow"}],
        "username": None,
        "display_name": None,
        "timezone": None,
    }


def test_deny_takes_access_away_and_keeps_the_data(client, ash_home):
    response = client.delete(f"/admin/users/{ALICE}/access", headers=AUTH)
    assert response.status_code == 200
    assert response.json() == {
        "entry": ALICE,
        "user_id": ALICE,
        "in_config": True,
        "schedules_removed": 0,
        "mcp_tokens_revoked": 0,
    }
    assert people(client)[ALICE]["access"] == "denied"
    conn = connect(ash_home / "ash.db")
    assert not is_allowed(conn, load_settings(), int(ALICE), "alice")
    conn.close()
    kept = client.get(f"/admin/users/{ALICE}", headers=AUTH).json()
    assert kept["counts"]["messages"] == 2 and kept["username"] == "alice"


def test_deny_by_username_and_refusals(client):
    assert client.delete("/admin/users/@carol/access", headers=AUTH).json()["entry"] == "@carol"
    assert people(client)["@carol"]["access"] == "denied"
    owner = client.delete(f"/admin/users/{OWNER}/access", headers=AUTH)
    assert owner.status_code == 409 and "owner" in owner.json()["detail"]
    for typed in ("12345678O", "12%20345", "@al", "0"):
        refused = client.delete(f"/admin/users/{typed}/access", headers=AUTH)
        assert refused.status_code == 400, typed
        assert "Telegram" in refused.json()["detail"]


def test_create_memory_takes_a_numeric_user_id(client):
    created = client.post(
        "/admin/memories", json={"content": "Alice is allergic to walnuts", "user_id": 2002}, headers=AUTH
    )
    assert created.status_code == 201, created.text
    assert created.json()["owner_user_id"] == ALICE
    listed = client.get("/admin/memories", params={"user_id": ALICE}, headers=AUTH).json()
    assert [m["content"] for m in listed["items"]] == ["Alice is allergic to walnuts"]
    assert client.post("/admin/memories", json={"content": "x", "user_id": 0}, headers=AUTH).status_code == 400


def test_export_says_true_or_false_like_the_api(client, ash_home):
    conn = connect(ash_home / "ash.db")
    knowledge.add(conn, load_settings(), "The office opens at 9", owner_user_id=None, is_global=True)
    knowledge.add(conn, load_settings(), "Alice likes tea", owner_user_id=ALICE)
    conn.close()
    exported = client.get("/admin/export", params={"user_id": ALICE}, headers=AUTH).json()
    flags = {m["content"]: m["is_global"] for m in exported["memories"]}
    # `is`, not ==: 1 == True in Python, and the export used to say 0/1.
    assert flags["The office opens at 9"] is True and flags["Alice likes tea"] is False
