"""POST /telegram/webhook through the real Litestar app: status codes, storage, hostile bodies."""

from __future__ import annotations

import json

import apsw
import pytest
from litestar.testing import AsyncTestClient

from tests.support.database import query
from tests.support.telegram import FIXTURES, SECRET, load

URL = "/telegram/webhook"


@pytest.fixture
def app(db_path, monkeypatch):
    from app import app as litestar_app

    return litestar_app


def inbox_rows(db_path) -> list[dict]:
    return query(db_path, "SELECT update_id, chat_key, kind, status, payload FROM inbox ORDER BY update_id")


def headers(secret: str | None = SECRET) -> dict:
    found = {"content-type": "application/json"}
    if secret is not None:
        found["x-telegram-bot-api-secret-token"] = secret
    return found


async def test_update_is_stored_once_and_answered_200(app, db_path, monkeypatch):
    monkeypatch.setenv("TELEGRAM_WEBHOOK_SECRET", SECRET)
    body = FIXTURES.joinpath("update_message_private_text_2.json").read_bytes()
    async with AsyncTestClient(app) as client:
        first = await client.post(URL, content=body, headers=headers())
        again = await client.post(URL, content=body, headers=headers())
    assert first.status_code == 200 and again.status_code == 200
    stored = inbox_rows(db_path)
    assert [(r["update_id"], r["chat_key"], r["kind"], r["status"]) for r in stored] == [
        (306197398, "408258968", "message", "pending")
    ]
    assert stored[0]["payload"] == body  # the raw update, byte for byte


@pytest.mark.parametrize(
    ("configured", "sent", "status"),
    [(None, SECRET, 403), (None, None, 403), (SECRET, None, 401), (SECRET, "wrong", 401), (SECRET, SECRET[:-1], 401)],
)
async def test_secret_checked_and_nothing_stored_when_refused(app, db_path, monkeypatch, configured, sent, status):
    if configured:
        monkeypatch.setenv("TELEGRAM_WEBHOOK_SECRET", configured)
    body = FIXTURES.joinpath("update_message_private_text_2.json").read_bytes()
    async with AsyncTestClient(app) as client:
        response = await client.post(URL, content=body, headers=headers(sent))
    assert response.status_code == status
    assert inbox_rows(db_path) == []


def deep(depth: int) -> bytes:
    return b'{"update_id": 7, "message": ' + b"[" * depth + b"]" * depth + b"}"


@pytest.mark.parametrize(
    ("body", "status"),
    [
        (b"not json", 400),
        (b"", 400),
        (b"[1, 2, 3]", 400),
        (b'{"message": {}}', 400),
        (b'{"update_id": "12"}', 400),
        (b'{"update_id": 1.5}', 400),
        (b'{"update_id": true}', 400),
        (b'{"update_id": 99999999999999999999999}', 400),
        (b'{"update_id": 5', 400),
        (deep(5000), 400),
        (b'{"update_id": 8, "message": ' + b"{" * 1 + b"}", 400),
    ],
    ids=[
        "text",
        "empty",
        "array",
        "no-id",
        "string-id",
        "float-id",
        "bool-id",
        "huge-id",
        "truncated",
        "nested-5000",
        "unbalanced",
    ],
)
async def test_malformed_bodies_get_400_and_the_app_stays_healthy(app, db_path, monkeypatch, body, status):
    monkeypatch.setenv("TELEGRAM_WEBHOOK_SECRET", SECRET)
    async with AsyncTestClient(app) as client:
        response = await client.post(URL, content=body, headers=headers())
        health = await client.get("/healthz")
        ok = await client.post(URL, content=json.dumps({"update_id": 1}).encode(), headers=headers())
    assert response.status_code == status
    assert health.status_code == 200
    assert ok.status_code == 200
    assert [r["update_id"] for r in inbox_rows(db_path)] == [1]


async def test_oversized_body_is_413_by_header_and_by_actual_size(app, db_path, monkeypatch, ash_home):
    monkeypatch.setenv("TELEGRAM_WEBHOOK_SECRET", SECRET)
    ash_home.joinpath("config.toml").write_text("[server]\nmax_body_bytes = 1000\n")
    padding = "x" * 2000
    body = json.dumps({"update_id": 3, "message": {"text": padding}}).encode()

    async with AsyncTestClient(app) as client:
        declared = await client.post(URL, content=body, headers=headers())
        lying = await client.post(URL, content=body, headers={**headers(), "content-length": "10"})
        health = await client.get("/healthz")
    assert declared.status_code == 413
    # A Content-Length that lies low: only counting the bytes that arrive catches it.
    assert lying.status_code == 413
    assert health.status_code == 200
    assert inbox_rows(db_path) == []


async def test_unusable_updates_are_stored_and_acknowledged(app, db_path, monkeypatch):
    """Channel posts, unknown types and odd shapes get 200 so Telegram does not retry them forever."""
    monkeypatch.setenv("TELEGRAM_WEBHOOK_SECRET", SECRET)
    odd = [
        load("update_channel_post.json"),
        {"update_id": 900, "poll": {"id": "1", "question": "?"}},
        {"update_id": 901, "message": {"chat": "not an object"}},
        {
            "update_id": 902,
            "message": {"message_id": 1, "chat": {"id": 5}, "text": "\u202e\ud83d\ude00 \x00 zalgo z\u0351\u0352"},
        },
    ]
    async with AsyncTestClient(app) as client:
        statuses = [
            (await client.post(URL, content=json.dumps(u).encode(), headers=headers())).status_code for u in odd
        ]
    assert statuses == [200, 200, 200, 200]
    kinds = {r["update_id"]: r["kind"] for r in inbox_rows(db_path)}
    assert kinds == {808628153: "channel_post", 900: "poll", 901: "unknown", 902: "message"}


async def test_database_that_cannot_store_answers_503(app, db_path, monkeypatch):
    """Telegram must retry what was not stored: a full database is a 503, not a 200."""
    import handlers.telegram_webhook

    async def full(*_):
        raise apsw.FullError("database or disk is full")

    monkeypatch.setenv("TELEGRAM_WEBHOOK_SECRET", SECRET)
    monkeypatch.setattr(handlers.telegram_webhook, "accept", full)
    body = FIXTURES.joinpath("update_message_private_text_2.json").read_bytes()
    async with AsyncTestClient(app) as client:
        response = await client.post(URL, content=body, headers=headers())
    assert response.status_code == 503
    assert inbox_rows(db_path) == []
