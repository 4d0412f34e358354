"""Probes and the admin guard, through the real app and its lifespan."""

from pathlib import Path

import pytest
from litestar.testing import AsyncTestClient

from app import app
from lib.db import connect
from lib.migrations import migrate


@pytest.fixture
async def client(db_path):
    async with AsyncTestClient(app=app) as test_client:
        yield test_client


async def test_healthz_is_200(client):
    response = await client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


async def test_readyz_is_200_when_migrated(client):
    response = await client.get("/readyz")
    assert response.status_code == 200
    assert response.json()["detail"] == "migrated"


async def test_readyz_is_503_when_migrations_are_pending(ash_home):
    connect(ash_home / "ash.db").close()  # exists, but blank
    async with AsyncTestClient(app=app) as client:
        response = await client.get("/readyz")
    assert response.status_code == 503
    assert "migrations pending" in response.json()["detail"]


async def test_readyz_is_503_when_the_database_cannot_be_opened(ash_home):
    blocker = ash_home / "not-a-dir"
    blocker.write_text("a file where the database folder should be")
    (ash_home / "config.toml").write_text(f'[memory]\ndatabase_path = "{blocker}/ash.db"\n')
    async with AsyncTestClient(app=app) as client:
        assert (await client.get("/healthz")).status_code == 200
        response = await client.get("/readyz")
    assert response.status_code == 503
    assert "database unavailable" in response.json()["detail"]


async def test_readyz_recovers_once_the_database_is_migrated(ash_home):
    path: Path = ash_home / "ash.db"
    async with AsyncTestClient(app=app) as client:
        assert (await client.get("/readyz")).status_code == 503
        migrate(connect(path))
        assert (await client.get("/readyz")).status_code == 200


async def test_admin_routes_are_403_when_no_token_is_configured(client):
    response = await client.get("/admin/stats", headers={"Authorization": "Bearer anything"})
    assert response.status_code == 403
    assert "ASH_ADMIN_TOKEN" in response.json()["detail"]


@pytest.mark.parametrize("header", [None, "Bearer wrong-token", "Basic c2VjcmV0", "Bearer", "secret-token-123"])
async def test_admin_routes_are_401_without_the_right_token(monkeypatch, db_path, header):
    monkeypatch.setenv("ASH_ADMIN_TOKEN", "secret-token-123")
    headers = {"Authorization": header} if header else {}
    async with AsyncTestClient(app=app) as client:
        response = await client.get("/admin/stats", headers=headers)
    assert response.status_code == 401
    assert "secret-token-123" not in response.text


async def test_admin_stats_with_the_token(monkeypatch, db_path):
    monkeypatch.setenv("ASH_ADMIN_TOKEN", "secret-token-123")
    async with AsyncTestClient(app=app) as client:
        response = await client.get("/admin/stats", headers={"Authorization": "Bearer secret-token-123"})
    assert response.status_code == 200
    body = response.json()
    assert body["counts"]["messages"] == 0
    assert body["database_bytes"] > 0


async def test_openapi_schema_is_served(client):
    response = await client.get("/schema/openapi.json")
    assert response.status_code == 200
    assert "/healthz" in response.json()["paths"]
