"""Telegram's command menu follows the command registry: `ash webhook set` sets it, and the server
sets it at start-up when it differs. /help lists the same commands."""

from __future__ import annotations

import asyncio
import json

import httpx
from click.testing import CliRunner
from litestar.testing import AsyncTestClient

import lib.web.lifespan
from lib.commands.cli import cli
from lib.conversation.commands import HELP, REGISTRY, Command
from lib.conversation.replies import Reply
from lib.telegram import menu
from lib.web.lifespan import publish_command_menu
from tests.support.telegram import API, SECRET, TOKEN, make_runtime

LISTED = ["new", "stop", "memory", "why", "timezone", "model", "reminders", "followups", "forget", "help"]


def test_webhook_set_also_sets_the_command_menu(db_path, monkeypatch, bot):
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", TOKEN)
    monkeypatch.setenv("TELEGRAM_WEBHOOK_SECRET", SECRET)
    monkeypatch.setenv("TELEGRAM_API_BASE", API)
    result = CliRunner().invoke(cli, ["webhook", "set", "https://ash.example.com/telegram/webhook"])
    assert result.exit_code == 0, result.output
    assert [c["command"] for c in bot.commands] == LISTED
    assert all(c["description"] for c in bot.commands)
    assert "command menu set: " + ", ".join(f"/{name}" for name in LISTED) in result.output
    [webhook] = [body for method, body in bot.calls if method == "setWebhook"]
    assert "edited_message" not in webhook["allowed_updates"]


def test_help_lists_every_command_of_the_menu():
    for command in REGISTRY:
        assert (f"/{command.name} - {command.description}" in HELP) == command.listed


async def test_start_up_sets_the_menu_only_when_it_changed(env, bot, monkeypatch):
    weather = Command("weather", "the forecast where you are", lambda ask: Reply("sunny"))
    monkeypatch.setattr(menu, "REGISTRY", (*REGISTRY, weather))
    async with httpx.AsyncClient() as http:
        runtime = make_runtime(http)
        await publish_command_menu(runtime, delay=0)
        await publish_command_menu(runtime, delay=0)  # the next start: nothing changed
    assert [method for method, _ in bot.calls] == ["getMyCommands", "setMyCommands", "getMyCommands"]
    assert [c["command"] for c in bot.commands] == [*LISTED, "weather"]


async def test_the_server_publishes_the_menu_after_start_up(env, bot, monkeypatch):
    from app import app

    monkeypatch.setenv("TELEGRAM_WEBHOOK_SECRET", SECRET)
    monkeypatch.setattr(lib.web.lifespan, "MENU_DELAY", 0)
    async with AsyncTestClient(app):
        # The lifespan runs in the test client's own loop: wait for its task's effect.
        for _ in range(200):
            if bot.commands:
                break
            await asyncio.sleep(0.01)
    assert [c["command"] for c in bot.commands] == LISTED


async def test_a_menu_telegram_refuses_is_only_logged(env, bot, caplog):
    bot.fail["getMyCommands"] = [(401, {"ok": False, "error_code": 401, "description": "Unauthorized"})]
    async with httpx.AsyncClient() as http:
        await publish_command_menu(make_runtime(http), delay=0)
    assert "could not update the Telegram command menu: Unauthorized" in caplog.text
    assert json.dumps(bot.commands) == "[]"
