"""The webhook has two doors (the server's fast path, and Litestar's route for other paths such as a
trailing slash); both follow the one error mapping of lib/web/errors.py."""

from __future__ import annotations

import apsw
import pytest
from litestar.testing import AsyncTestClient

from lib.errors import DatabaseUnavailable
from tests.support.telegram import FIXTURES, SECRET

HEADERS = {"content-type": "application/json", "x-telegram-bot-api-secret-token": SECRET}
DOORS = {"fast path": "/telegram/webhook", "litestar route": "/telegram/webhook/"}


@pytest.fixture
def server(db_path, monkeypatch):
    monkeypatch.setenv("TELEGRAM_WEBHOOK_SECRET", SECRET)
    from app import server

    return server


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize(
    ("error", "status"),
    [
        (apsw.FullError("database or disk is full"), 503),
        (apsw.BusyError("database is locked"), 503),
        (apsw.ReadOnlyError("attempt to write a readonly database"), 503),
        (DatabaseUnavailable("cannot open the database"), 503),
        (apsw.SQLError("no such table: inbox"), 500),
        (RuntimeError("a bug"), 500),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, Exception) else str(value),
)
async def test_both_doors_map_a_storage_error_the_same_way(server, monkeypatch, caplog, door, error, status):
    import handlers.telegram_webhook

    async def failing(*_):
        raise error

    monkeypatch.setattr(handlers.telegram_webhook, "accept", failing)
    body = FIXTURES.joinpath("update_message_private_text_2.json").read_bytes()
    async with AsyncTestClient(server) as client:
        response = await client.post(DOORS[door], content=body, headers=HEADERS)
        health = await client.get("/healthz")
    assert response.status_code == status
    assert response.json()["ok"] is False
    assert health.status_code == 200  # the process carries on
    if status == 500:  # a bug: logged with its traceback
        assert "unexpected error" in caplog.text and type(error).__name__ in caplog.text
