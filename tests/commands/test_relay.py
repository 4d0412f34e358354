"""`ash relay`: getUpdates to the webhook, with Telegram and the webhook mocked at the network edge.
(tests/commands/test_relay_e2e.py runs it for real against `ash serve`.)"""

from __future__ import annotations

import json
import logging

import httpx
import pytest
import respx
from click.testing import CliRunner

from lib.commands.cli import cli
from lib.errors import RelayStopped
from lib.telegram.relay import Relay, default_webhook_url
from tests.support.agent import RecordingSleep
from tests.support.telegram import API, SECRET, TOKEN, private_text

GET_UPDATES = f"{API}/bot{TOKEN}/getUpdates"
WEBHOOK = "http://127.0.0.1:9123/telegram/webhook"
ANOTHER_POLLER = "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"
FLOOD = {"ok": False, "error_code": 429, "description": "Too Many Requests: retry after 7"}
WEBHOOK_ACTIVE = (
    "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"
)


def polled(*updates: bytes) -> httpx.Response:
    return httpx.Response(200, content=b'{"ok":true,"result":[' + b",".join(updates) + b"]}")


def conflict(description: str) -> httpx.Response:
    return httpx.Response(409, json={"ok": False, "error_code": 409, "description": description})


def raw(update_id: int, text: str = "hi") -> bytes:
    # Telegram's own spacing and key order, which the webhook must receive unchanged.
    return json.dumps(private_text(update_id, text), indent=1).encode()


@pytest.fixture
def relay_env(monkeypatch, ash_home):
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", TOKEN)
    monkeypatch.setenv("TELEGRAM_WEBHOOK_SECRET", SECRET)
    monkeypatch.setenv("TELEGRAM_API_BASE", API)
    monkeypatch.setenv("PORT", "9123")


def bot_api(router: respx.MockRouter, *poll_answers) -> respx.Route:
    router.post(f"{API}/bot{TOKEN}/getMe").respond(
        json={"ok": True, "result": {"id": 1, "is_bot": True, "username": "ash_bot"}}
    )
    return router.post(GET_UPDATES).mock(side_effect=list(poll_answers))


def test_relay_posts_each_update_byte_for_byte_to_the_local_webhook_with_the_secret(relay_env):
    first, second = raw(700, "one"), raw(701, "two")
    with respx.mock() as router:
        polls = bot_api(router, polled(first, second), conflict(ANOTHER_POLLER))
        webhook = router.post(WEBHOOK).respond(200, json={"ok": True})
        result = CliRunner().invoke(cli, ["relay"])
    assert [call.request.content for call in webhook.calls] == [first, second]
    assert all(call.request.headers["x-telegram-bot-api-secret-token"] == SECRET for call in webhook.calls)
    sent = [json.loads(call.request.content) for call in polls.calls]
    assert "offset" not in sent[0] and sent[1]["offset"] == 702
    assert sent[0]["allowed_updates"] == ["message", "callback_query", "my_chat_member"] and sent[0]["timeout"] > 0
    assert result.exit_code == 1 and "another program is reading this bot's updates" in result.output


def test_relay_stops_with_the_fixing_command_while_a_webhook_is_registered(relay_env):
    with respx.mock() as router:
        bot_api(router, conflict(WEBHOOK_ACTIVE))
        result = CliRunner().invoke(cli, ["relay", "--url", "http://10.0.0.5:8080/telegram/webhook"])
    assert result.exit_code == 1
    assert "run `ash webhook delete`, then `ash relay` again" in result.output


def test_relay_stops_at_once_on_a_refused_token(relay_env):
    with respx.mock(assert_all_called=False) as router:
        router.post(f"{API}/bot{TOKEN}/getMe").respond(
            401, json={"ok": False, "error_code": 401, "description": "Unauthorized"}
        )
        polls = router.post(GET_UPDATES)
        result = CliRunner().invoke(cli, ["relay"])
    assert result.exit_code == 1 and "Telegram refused TELEGRAM_BOT_TOKEN (Unauthorized)" in result.output
    assert polls.call_count == 0


def test_relay_needs_the_webhook_secret(relay_env, monkeypatch):
    monkeypatch.delenv("TELEGRAM_WEBHOOK_SECRET")
    result = CliRunner().invoke(cli, ["relay"])
    assert result.exit_code == 1 and "TELEGRAM_WEBHOOK_SECRET is not set" in result.output


async def test_a_refused_update_is_skipped_and_failures_are_retried_in_order(caplog):
    sleep = RecordingSleep()
    one, refused, three = raw(10), raw(11), raw(12)
    webhook_answers = [
        httpx.Response(503),  # the server's database is busy
        httpx.ConnectError("refused"),  # the server is restarting
        httpx.Response(200),
        httpx.Response(400, json={"detail": "body is not valid UTF-8"}),
        httpx.Response(408),
        httpx.Response(200),
    ]
    with respx.mock() as router:
        polls = router.post(GET_UPDATES).mock(
            side_effect=[
                httpx.ConnectError("offline"),
                httpx.Response(502),
                httpx.Response(429, json={**FLOOD, "parameters": {"retry_after": 7}}),
                polled(one, refused, three),
                conflict(ANOTHER_POLLER),
            ]
        )
        webhook = router.post(WEBHOOK).mock(side_effect=webhook_answers)
        async with httpx.AsyncClient() as http:
            relay = Relay(http, TOKEN, API, WEBHOOK, SECRET, sleep=sleep)
            with caplog.at_level(logging.WARNING, "ash.relay"), pytest.raises(RelayStopped):
                await relay.run()
    assert [call.request.content for call in webhook.calls] == [one, one, one, refused, three, three]
    assert json.loads(polls.calls.last.request.content)["offset"] == 13
    backoff = [d for d in sleep.delays if d != 7]
    assert 7 in sleep.delays and len(backoff) == 5 and all(0 < d <= 5 for d in backoff)
    assert "update 11 refused by the webhook with 400, skipped" in caplog.text


@pytest.mark.parametrize(("status", "says"), [(401, "same TELEGRAM_WEBHOOK_SECRET"), (404, "check --url")])
async def test_a_wrong_secret_or_url_stops_the_relay_without_skipping_anything(status, says):
    with respx.mock() as router:
        polls = router.post(GET_UPDATES).mock(side_effect=[polled(raw(20), raw(21))])
        webhook = router.post(WEBHOOK).respond(status)
        async with httpx.AsyncClient() as http:
            with pytest.raises(RelayStopped, match=says):
                await Relay(http, TOKEN, API, WEBHOOK, "wrong", sleep=RecordingSleep()).run()
    assert polls.call_count == 1 and webhook.call_count == 1  # update 20 was never confirmed


def test_the_default_webhook_is_this_machines_server():
    assert default_webhook_url("0.0.0.0", 8080) == "http://127.0.0.1:8080/telegram/webhook"  # noqa: S104
    assert default_webhook_url("::1", 9000) == "http://[::1]:9000/telegram/webhook"


def test_the_relay_leaves_a_heartbeat_that_the_doctor_reads(relay_env, ash_home):
    """`ash doctor` warned "no webhook registered" for ever beside a working relay; now the relay
    says after each poll that it runs, and the doctor reports it (or that it stopped)."""
    import time

    from lib.commands import relay_state
    from lib.commands.doctor_remote import webhook_check

    with respx.mock() as router:
        bot_api(router, polled(raw(700)), conflict(ANOTHER_POLLER))
        router.post(WEBHOOK).respond(200, json={"ok": True})
        CliRunner().invoke(cli, ["relay"])
    state = relay_state.read(ash_home)
    assert state["url"] == WEBHOOK and state["bot"] == "ash_bot"
    assert (ash_home / relay_state.STATE_FILE).stat().st_mode & 0o777 == 0o600

    no_webhook = {"url": "", "pending_update_count": 0}
    now = state["polled_at"] + 30
    running = webhook_check(no_webhook, now, relay=state)
    assert running.status == "ok" and "`ash relay`" in running.detail and WEBHOOK in running.detail
    stopped = webhook_check(no_webhook, now + relay_state.FRESH_SECONDS, relay=state)
    assert stopped.status == "warn" and "not running" in stopped.detail and "systemctl --user start" in stopped.hint
    never = webhook_check(no_webhook, time.time(), relay=None)
    assert never.status == "warn" and "none registered" in never.detail
