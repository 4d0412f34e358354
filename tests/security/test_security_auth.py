"""Webhook and admin authentication through the real app: missing, wrong and unconfigured secrets.

Every /admin route the app registers is checked (a route added later is covered without
editing this file), and a refused webhook stores nothing.
"""

from __future__ import annotations

import pytest
from litestar.testing import TestClient

from lib.auth_limit import AuthLimiter
from tests.support.database import query
from tests.support.telegram import SECRET, load

ADMIN = "admin-token-for-tests"


def _client(monkeypatch, **env: str) -> TestClient:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    from app import app

    return TestClient(app)


def _admin_routes() -> list[tuple[str, str]]:
    from app import app

    found = []
    for route in app.routes:
        # The web view signs in with its own session, never the bearer token: tests/web/test_admin_ui.py.
        if not route.path.startswith("/admin") or route.path.startswith("/admin/ui"):
            continue
        path = route.path.replace("{memory_id:int}", "1").replace("{session_id:int}", "1")
        path = path.replace("{schedule_id:int}", "1")
        path = path.replace("{user_id:str}", "42").replace("{user_id:int}", "42")
        for method in sorted(route.methods - {"OPTIONS", "HEAD"}):
            found.append((method, path))
    return found


def _inbox_rows(client: TestClient) -> int:
    return query(client.app.state.runtime.settings.database_path, "SELECT count(*) AS n FROM inbox")[0]["n"]


def test_every_admin_route_is_found():
    paths = {path for _, path in _admin_routes()}
    assert {"/admin/memories", "/admin/stats", "/admin/tick", "/admin/backup", "/admin/export"} <= paths


@pytest.mark.parametrize(
    "headers",
    [{}, {"authorization": "Bearer wrong"}, {"authorization": ADMIN}, {"authorization": f"Basic {ADMIN}"}],
    ids=["missing", "wrong", "no-scheme", "basic"],
)
def test_admin_refuses_missing_or_wrong_token_on_every_route(db_path, monkeypatch, headers):
    with _client(monkeypatch, ASH_ADMIN_TOKEN=ADMIN) as client:
        # Every route's refusal, not the limit on guesses (test_auth_limit.py) that follows it.
        client.app.state.auth_limiter = AuthLimiter(per_client=1_000)
        for method, path in _admin_routes():
            response = client.request(method, path, headers=headers, json={})
            assert response.status_code == 401, (method, path, response.text)
            assert ADMIN not in response.text


def test_admin_is_closed_when_no_token_is_configured(db_path, monkeypatch):
    with _client(monkeypatch) as client:
        for method, path in _admin_routes():
            response = client.request(method, path, headers={"authorization": "Bearer anything"}, json={})
            assert response.status_code == 403, (method, path)


def test_admin_accepts_the_right_token(db_path, monkeypatch):
    with _client(monkeypatch, ASH_ADMIN_TOKEN=ADMIN) as client:
        assert client.get("/admin/stats", headers={"authorization": f"Bearer {ADMIN}"}).status_code == 200


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        ({"x-telegram-bot-api-secret-token": "wrong"}, 401),
        ({"x-telegram-bot-api-secret-token": SECRET[:-1]}, 401),
        ({"x-telegram-bot-api-secret-token": SECRET + "x"}, 401),
        ({"x-telegram-bot-api-secret-token": ""}, 401),
    ],
    ids=["missing", "wrong", "prefix", "longer", "empty"],
)
def test_webhook_with_missing_or_wrong_secret_is_refused_and_stores_nothing(db_path, monkeypatch, headers, status):
    update = load("update_channel_post.json")
    with _client(monkeypatch, TELEGRAM_WEBHOOK_SECRET=SECRET) as client:
        assert client.post("/telegram/webhook", json=update, headers=headers).status_code == status
        assert _inbox_rows(client) == 0
        good = {"x-telegram-bot-api-secret-token": SECRET}
        assert client.post("/telegram/webhook", json=update, headers=good).status_code == 200
        assert _inbox_rows(client) == 1


def test_webhook_without_a_configured_secret_refuses_everything(db_path, monkeypatch):
    update = load("update_channel_post.json")
    with _client(monkeypatch) as client:
        for headers in ({}, {"x-telegram-bot-api-secret-token": "anything"}):
            assert client.post("/telegram/webhook", json=update, headers=headers).status_code == 403
        assert _inbox_rows(client) == 0
