"""What `ash serve` runs (app.server): the webhook answered before Litestar, the rest through it."""

from __future__ import annotations

import pytest
from litestar.testing import AsyncTestClient

from tests.support.database import inbox_statuses
from tests.support.telegram import FIXTURES, SECRET

URL = "/telegram/webhook"
HEADERS = {"content-type": "application/json", "x-telegram-bot-api-secret-token": SECRET}


@pytest.fixture
def server(db_path, monkeypatch):
    monkeypatch.setenv("TELEGRAM_WEBHOOK_SECRET", SECRET)
    from app import server

    return server


async def test_webhook_and_other_routes_are_served(server, db_path):
    body = FIXTURES.joinpath("update_message_private_text_2.json").read_bytes()
    async with AsyncTestClient(server) as client:  # the lifespan runs through Litestar
        stored = await client.post(URL, content=body, headers=HEADERS)
        refused = await client.post(URL, content=body, headers={**HEADERS, "x-telegram-bot-api-secret-token": "no"})
        wrong_method = await client.get(URL)
        health = await client.get("/healthz")
        admin = await client.get("/admin/stats")
    assert (stored.status_code, stored.json()) == (200, {"ok": True})
    assert refused.status_code == 401
    assert wrong_method.status_code == 405
    assert health.status_code == 200
    assert admin.status_code in (401, 403)  # Litestar's admin guard, not the fast path
    assert inbox_statuses(db_path) == {306197398: "pending"}


async def test_trailing_slash_reaches_the_same_handler_through_litestar(server, db_path):
    body = FIXTURES.joinpath("update_channel_post.json").read_bytes()
    async with AsyncTestClient(server) as client:
        response = await client.post(URL + "/", content=body, headers=HEADERS)
    assert response.status_code == 200
    assert inbox_statuses(db_path) == {808628153: "skipped"}


async def test_an_error_the_handler_lets_through_is_logged_and_answered_500(db_path, monkeypatch, caplog):
    from lib.web.fast_path import with_fast_path

    monkeypatch.setenv("TELEGRAM_WEBHOOK_SECRET", SECRET)
    from app import app

    async def broken(scope, receive, send):
        raise RuntimeError("boom")

    server = with_fast_path(app, URL, broken)
    async with AsyncTestClient(server) as client:
        response = await client.post(URL, content=b"{}", headers=HEADERS)
        health = await client.get("/healthz")
    assert response.status_code == 500 and health.status_code == 200
    assert "unexpected error" in caplog.text and "boom" in caplog.text
