"""`ash webhook` and `ash users`, and POST /admin/tick, as a user runs them."""

from __future__ import annotations

import json

import httpx
import respx
from click.testing import CliRunner
from litestar.testing import AsyncTestClient

from lib.commands.cli import cli
from lib.db import connect, one
from tests.support.telegram import API, SECRET, TOKEN, load, private_text


def run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_webhook_set_registers_secret_and_allowed_updates(db_path, monkeypatch):
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", TOKEN)
    monkeypatch.setenv("TELEGRAM_WEBHOOK_SECRET", SECRET)
    monkeypatch.setenv("TELEGRAM_API_BASE", API)
    with respx.mock() as router:
        route = router.post(f"{API}/bot{TOKEN}/setWebhook").mock(
            return_value=httpx.Response(200, json=load("setWebhook_ok_webhook_was_set.json"))
        )
        router.post(f"{API}/bot{TOKEN}/setMyCommands").mock(
            return_value=httpx.Response(200, json={"ok": True, "result": True})
        )
        result = run("webhook", "set", "https://ash.example.com/telegram/webhook")
    assert result.exit_code == 0, result.output
    sent = json.loads(route.calls.last.request.content)
    assert sent["url"] == "https://ash.example.com/telegram/webhook"
    assert sent["secret_token"] == SECRET
    assert sent["allowed_updates"] == ["message", "callback_query", "my_chat_member"]


def test_webhook_set_refuses_without_a_secret_and_info_shows_state(db_path, monkeypatch):
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", TOKEN)
    monkeypatch.setenv("TELEGRAM_API_BASE", API)
    refused = CliRunner().invoke(cli, ["webhook", "set", "https://ash.example.com/telegram/webhook"])
    assert refused.exit_code == 1 and "TELEGRAM_WEBHOOK_SECRET is not set" in refused.output
    with respx.mock() as router:
        router.post(f"{API}/bot{TOKEN}/getWebhookInfo").mock(
            return_value=httpx.Response(200, json=load("getWebhookInfo_ok_webhook_set.json"))
        )
        info = run("webhook", "info")
    assert "pending updates: 0" in info.output and "allowed updates: message, channel_post" in info.output


def test_webhook_errors_are_readable(db_path, monkeypatch):
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", TOKEN)
    monkeypatch.setenv("TELEGRAM_API_BASE", API)
    with respx.mock() as router:
        router.post(f"{API}/bot{TOKEN}/deleteWebhook").mock(
            return_value=httpx.Response(401, json={"ok": False, "error_code": 401, "description": "Unauthorized"})
        )
        result = CliRunner().invoke(cli, ["webhook", "delete"])
    assert result.exit_code == 1 and "Telegram refused: Unauthorized" in result.output


def test_users_allow_show_and_notes(db_path):
    assert "allowed 12345" in run("users", "allow", "12345").output
    assert "already allowed" in run("users", "allow", "12345").output
    assert "pinned" in run("users", "allow", "@SomeOne").output
    shown = run("users", "show").output
    assert "12345  (cli)" in shown and "@someone  (cli)" in shown
    assert "saved" in run("users", "notes", "12345", "Prefers short answers.").output
    assert run("users", "notes", "12345").output.strip() == "Prefers short answers."
    assert "Prefers short answers." in run("users", "show", "12345").output
    bad = CliRunner().invoke(cli, ["users", "allow", "@"])
    assert bad.exit_code == 1


async def test_admin_tick_needs_the_token_and_reports_the_inbox(db_path, monkeypatch):
    from app import app
    from lib.telegram.intake import store_update

    monkeypatch.setenv("ASH_ADMIN_TOKEN", "admintoken")
    async with AsyncTestClient(app) as client:
        refused = await client.post("/admin/tick")
        store_update(app.state.runtime, json.dumps(private_text(1, "hi")).encode())
        ticked = await client.post("/admin/tick", headers={"authorization": "Bearer admintoken"})
    assert refused.status_code == 401
    assert ticked.status_code == 200
    # No bot token: the update waits in the inbox instead of failing.
    assert ticked.json()["inbox"] == {"pending": 1}
    conn = connect(db_path)
    assert one(conn, "SELECT status FROM inbox")["status"] == "pending"
    conn.close()
