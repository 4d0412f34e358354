"""Errors become the right HTTP answer in one place, and no secret reaches a log line."""

from __future__ import annotations

import logging

import apsw
from litestar import Litestar, get
from litestar.testing import TestClient

from lib.config import Secrets
from lib.redact import RedactSecrets
from lib.web.errors import EXCEPTION_HANDLERS

TOKEN = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"


@get("/bug", sync_to_thread=False)
def bug() -> None:
    raise KeyError("a bug in a handler")


@get("/busy", sync_to_thread=False)
def busy() -> None:
    raise apsw.BusyError("database is locked")


@get("/constraint", sync_to_thread=False)
def constraint() -> None:
    raise apsw.ConstraintError("UNIQUE constraint failed")


def client() -> TestClient:
    # No logging_config: Litestar would replace the root handlers, and caplog with them.
    app = Litestar(route_handlers=[bug, busy, constraint], exception_handlers=EXCEPTION_HANDLERS, logging_config=None)
    return TestClient(app)


def test_an_unhandled_error_is_a_plain_500_and_is_logged_with_its_traceback(caplog):
    with caplog.at_level(logging.ERROR, logger="ash"), client() as test_client:
        response = test_client.get("/bug")
    assert response.status_code == 500
    assert "a bug in a handler" not in response.text
    [record] = [r for r in caplog.records if r.name == "ash"]
    assert "unhandled error on GET /bug" in record.getMessage()
    assert record.exc_info and record.exc_info[0] is KeyError


def test_a_busy_database_is_503_but_a_broken_constraint_is_a_logged_500(caplog):
    with caplog.at_level(logging.ERROR, logger="ash"), client() as test_client:
        assert test_client.get("/busy").status_code == 503
        assert test_client.get("/constraint").status_code == 500
    assert any("unhandled error on GET /constraint" in r.getMessage() for r in caplog.records)


def test_secrets_are_redacted_from_messages_arguments_and_tracebacks():
    secrets = Secrets(telegram_bot_token=TOKEN, anthropic_api_key="sk-ant-very-secret", admin_token="adm")
    redactor = RedactSecrets(secrets)
    record = logging.LogRecord(
        "httpx", logging.INFO, __file__, 1, "POST %s failed", (f"/bot{TOKEN}/sendMessage",), None
    )
    assert redactor.filter(record)
    assert record.getMessage() == "POST /bot<redacted>/sendMessage failed"
    try:
        raise RuntimeError("key sk-ant-very-secret was refused")
    except RuntimeError:
        import sys

        failed = logging.LogRecord("ash", logging.ERROR, __file__, 1, "call failed", (), sys.exc_info())
    redactor.filter(failed)
    assert "sk-ant-very-secret" not in failed.exc_text and "<redacted>" in failed.exc_text
    # Too short to redact safely (it would blank ordinary words); such a token is refused elsewhere.
    assert "adm" not in redactor.values


async def test_the_server_redacts_secrets_in_every_log_line(db_path, monkeypatch):
    from litestar.testing import AsyncTestClient

    from app import app

    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", TOKEN)
    async with AsyncTestClient(app=app):
        handlers = logging.getLogger().handlers
        assert handlers and all(any(isinstance(f, RedactSecrets) for f in h.filters) for h in handlers)
        record = logging.LogRecord("anything", logging.ERROR, __file__, 1, "url %s", (f"/bot{TOKEN}/getMe",), None)
        for handler in handlers:
            for log_filter in handler.filters:
                log_filter.filter(record)
        assert TOKEN.split(":")[1] not in record.getMessage()
