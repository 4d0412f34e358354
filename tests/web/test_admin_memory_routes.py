"""The memory admin API through the real app: auth, memories, sessions, users, export, backup."""

from __future__ import annotations

import pytest
from litestar.testing import TestClient

from lib.db import connect
from lib.memory import knowledge, store
from tests.support.memory_retrieval import open_db
from tests.support.memory_surfaces import make_settings, say

TOKEN = "admin-secret-123"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def seeded(ash_home, monkeypatch):
    """A database with two users' turns and knowledge; returns (settings, ids)."""
    monkeypatch.setenv("ASH_ADMIN_TOKEN", TOKEN)
    settings = make_settings(ash_home, '[embeddings]\nprovider = "none"\n[memory]\nextraction_enabled = false\n')
    conn = open_db(settings)
    user_msg, _ = say(conn, settings, "1001", "My favourite tea is genmaicha", "Lovely choice.")
    say(conn, settings, "2002", "I collect vintage typewriters", "Nice hobby.")
    tea = knowledge.add(
        conn, settings, "The user's favourite tea is genmaicha", owner_user_id="1001", source_message_id=user_msg
    )
    typewriters = knowledge.add(conn, settings, "The user collects typewriters", owner_user_id="2002")
    store.set_notes(conn, "1001", "Likes tea.")
    conn.close()
    return settings, {"tea": tea, "typewriters": typewriters, "tea_message": user_msg}


@pytest.fixture
def client(seeded):
    from app import app

    with TestClient(app=app) as test_client:
        yield test_client


ROUTES = [
    ("GET", "/admin/memories"),
    ("POST", "/admin/memories"),
    ("DELETE", "/admin/memories/1"),
    ("GET", "/admin/sessions"),
    ("GET", "/admin/sessions/1/messages"),
    ("GET", "/admin/users/1001"),
    ("PUT", "/admin/users/1001/notes"),
    ("GET", "/admin/export"),
    ("POST", "/admin/backup"),
]


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_every_route_needs_the_bearer_token(client, method, path):
    assert client.request(method, path).status_code == 401
    assert client.request(method, path, headers={"Authorization": "Bearer wrong"}).status_code == 401


def test_routes_are_off_without_a_configured_token(seeded, monkeypatch):
    monkeypatch.delenv("ASH_ADMIN_TOKEN")
    from app import app

    with TestClient(app=app) as client:
        for method, path in ROUTES:
            assert client.request(method, path, headers=AUTH).status_code == 403, path


def test_create_list_search_and_delete_memories(client, seeded):
    _, ids = seeded
    created = client.post(
        "/admin/memories",
        json={"content": "The user is allergic to walnuts", "user_id": "1001", "expires_at": "2999-01-01"},
        headers=AUTH,
    )
    assert created.status_code == 201
    body = created.json()
    assert body["owner_user_id"] == "1001" and body["source"] == "admin" and body["active"] is True
    assert body["expires_at"] == "2999-01-01T00:00:00.000Z"

    listed = client.get("/admin/memories", params={"user_id": "1001"}, headers=AUTH).json()
    assert {m["id"] for m in listed["items"]} == {ids["tea"], body["id"]}

    found = client.get("/admin/memories", params={"user_id": "1001", "q": "walnuts"}, headers=AUTH).json()
    assert [m["id"] for m in found["items"]] == [body["id"]] and found["items"][0]["score"] is not None
    # Search is scoped to what the user may see: 2002's typewriters are not 1001's.
    other = client.get("/admin/memories", params={"user_id": "1001", "q": "typewriters"}, headers=AUTH).json()
    assert other["items"] == []

    deleted = client.delete(f"/admin/memories/{ids['tea']}", headers=AUTH)
    assert deleted.status_code == 200
    assert deleted.json()["memory_ids"] == [ids["tea"]]
    assert ids["tea_message"] in deleted.json()["message_ids"]
    assert client.delete(f"/admin/memories/{ids['tea']}", headers=AUTH).status_code == 404


@pytest.mark.parametrize(
    "payload",
    [
        {},
        {"content": ""},
        {"content": "no owner"},
        {"content": "x", "user_id": "1", "confidence": 2},
        {"content": "x", "user_id": "1", "expires_at": "someday"},
        {"content": "x", "user_id": "1", "unknown": 1},
    ],
)
def test_bad_memory_input_is_a_400_with_a_reason(client, payload):
    response = client.post("/admin/memories", json=payload, headers=AUTH)
    assert response.status_code == 400, response.text
    assert response.json()["detail"]


def test_bad_query_parameters_are_400_not_500(client):
    assert client.get("/admin/memories", params={"limit": "lots"}, headers=AUTH).status_code == 400
    assert client.get("/admin/memories", params={"limit": 0}, headers=AUTH).status_code == 400
    assert client.get("/admin/sessions/abc/messages", headers=AUTH).status_code in (400, 404)
    assert client.post("/admin/memories", content=b"{not json", headers=AUTH).status_code == 400


def test_global_entry_needs_no_owner(client):
    response = client.post("/admin/memories", json={"content": "Office opens at 9", "is_global": True}, headers=AUTH)
    assert response.status_code == 201
    assert response.json()["is_global"] is True and response.json()["owner_user_id"] is None


def test_sessions_and_their_messages(client):
    sessions = client.get("/admin/sessions", params={"user_id": "1001"}, headers=AUTH).json()
    assert sessions["count"] == 1
    session = sessions["items"][0]
    assert session["chat_id"] == "1001" and session["message_count"] == 2
    messages = client.get(f"/admin/sessions/{session['id']}/messages", headers=AUTH).json()
    assert [m["role"] for m in messages["messages"]] == ["user", "assistant"]
    assert messages["messages"][0]["content"] == "My favourite tea is genmaicha"
    assert client.get("/admin/sessions/999/messages", headers=AUTH).status_code == 404


def test_user_profile_and_notes(client, seeded):
    user = client.get("/admin/users/1001", headers=AUTH).json()
    assert user["notes"] == "Likes tea." and user["counts"]["messages"] == 2
    assert [f["content"] for f in user["facts"]] == ["The user's favourite tea is genmaicha"]
    updated = client.put("/admin/users/1001/notes", json={"notes": "Likes green tea."}, headers=AUTH)
    assert updated.status_code == 200 and updated.json()["notes"] == "Likes green tea."
    assert client.get("/admin/users/1001", headers=AUTH).json()["notes"] == "Likes green tea."
    assert client.get("/admin/users/424242", headers=AUTH).status_code == 404
    assert client.put("/admin/users/1001/notes", json={"note": "typo"}, headers=AUTH).status_code == 400


def test_export_one_user_or_everyone(client):
    one_user = client.get("/admin/export", params={"user_id": "1001"}, headers=AUTH).json()
    assert {m["owner_user_id"] for m in one_user["messages"]} == {"1001"}
    assert [m["content"] for m in one_user["memories"]] == ["The user's favourite tea is genmaicha"]
    assert one_user["profiles"][0]["notes"] == "Likes tea."
    everyone = client.get("/admin/export", headers=AUTH).json()
    assert {m["owner_user_id"] for m in everyone["messages"]} == {"1001", "2002"}
    assert len(everyone["memories"]) == 2


def test_backup_streams_a_valid_sqlite_database_with_the_rows(client, seeded, tmp_path):
    settings, _ = seeded
    response = client.post("/admin/backup", headers=AUTH)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/vnd.sqlite3")
    assert "attachment" in response.headers["content-disposition"]
    assert response.content.startswith(b"SQLite format 3\x00")
    copy = tmp_path / "downloaded.db"
    copy.write_bytes(response.content)
    conn = connect(copy, readonly=True)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    contents = {r[0] for r in conn.execute("SELECT content FROM memories")}
    assert "The user's favourite tea is genmaicha" in contents
    assert conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 4
    conn.close()
    # The temporary snapshot next to the database is cleaned up after sending.
    assert not list(settings.database_path.parent.glob(".backup-*"))


def test_openapi_schema_lists_the_memory_routes_with_typed_bodies(client):
    schema = client.get("/schema/openapi.json").json()
    paths = schema["paths"]
    for _, path in ROUTES:
        template = path.replace("/1/", "/{session_id}/").replace("/1001", "/{user_id}")
        template = template.replace("memories/1", "memories/{memory_id}")
        assert template in paths, template
    components = schema["components"]["schemas"]
    records = {"Knowledge", "StoredMessage", "AuditEntry"}  # memory's own records, as the API returns them
    assert {"MemoryCreate", "SessionOut", "UserOut", "ExportOut", *records} <= set(components)


def test_listing_shows_status_and_origin_and_filters_by_status(client, seeded):
    settings, ids = seeded
    conn = connect(settings.database_path)
    waiting = knowledge.add(
        conn,
        settings,
        "The user banks with EvilBank",
        owner_user_id="1001",
        source="tool",
        origin="web",
        status="pending",
    )
    everything = client.get("/admin/memories", params={"user_id": "1001"}, headers=AUTH).json()["items"]
    assert [(i["id"], i["status"], i["origin"]) for i in everything] == [(ids["tea"], "active", "user")]
    pending = client.get("/admin/memories", params={"user_id": "1001", "status": "pending"}, headers=AUTH).json()
    assert [(i["id"], i["status"], i["origin"]) for i in pending["items"]] == [(waiting, "pending", "web")]
    assert client.get("/admin/memories", params={"status": "maybe"}, headers=AUTH).status_code == 400
    refused = client.post(
        "/admin/memories", json={"content": "API key sk-live-abcdefghijklmnopqrstuv", "user_id": "1001"}, headers=AUTH
    )
    assert refused.status_code == 400 and "looks like an API key" in refused.text
