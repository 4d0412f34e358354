"""`ash doctor` checks what a user would check: the token with getMe, the webhook Telegram has on
record, a one-token request to each configured model, the embeddings, the Docker engine and image,
that somebody is allowed, file permissions. Each failure names the command that fixes it; the
doctor never creates the database or the data folder, and never hangs on a dead server.

Telegram is mocked at the network edge with respx, the model SDKs with httpx2_mock; the Docker
engine is a dead socket or the stand-in of tests/support/fake_docker.py."""

from __future__ import annotations

import os
import socket
import time

import httpx
import pytest
from click.testing import CliRunner

import lib.commands.doctor_remote as doctor_remote
from lib.commands.cli import cli
from lib.commands.doctor_remote import webhook_check
from lib.db import connect
from lib.migrations import migrate
from tests.support.agent import ANTHROPIC, ANTHROPIC_MESSAGES, body
from tests.support.fake_docker import FakeDockerEngine
from tests.support.telegram import SECRET, TOKEN, load

TELEGRAM = "https://telegram.test"
HOOK = "https://ash.example.com/telegram/webhook"
OLLAMA = "http://127.0.0.1:11434"
HEALTHY = 'owner = 408258968\n[embeddings]\nprovider = "none"\n[sandbox]\nenabled = false\n'


def webhook_info(**fields) -> dict:
    """The recorded getWebhookInfo answer with `fields` changed."""
    info = load("getWebhookInfo_ok_webhook_set.json")
    info["result"].update({"url": HOOK, "pending_update_count": 0, **fields})
    return info


@pytest.fixture
def telegram(respx_mock):
    """A Bot API that knows the token and has Ash's webhook on record."""
    respx_mock.post(f"{TELEGRAM}/bot{TOKEN}/getMe", name="getMe").mock(
        return_value=httpx.Response(200, json=load("getMe_ok.json"))
    )
    respx_mock.post(f"{TELEGRAM}/bot{TOKEN}/getWebhookInfo", name="getWebhookInfo").mock(
        return_value=httpx.Response(200, json=webhook_info())
    )
    return respx_mock


@pytest.fixture
def configured(ash_home, monkeypatch, tmp_path):
    """Secrets set, Anthropic as the only model, no fallback, embeddings and sandbox off."""
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", TOKEN)
    monkeypatch.setenv("TELEGRAM_API_BASE", TELEGRAM)
    monkeypatch.setenv("TELEGRAM_WEBHOOK_SECRET", SECRET)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", ANTHROPIC)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    write(ash_home, HEALTHY)
    database = ash_home / "ash.db"
    conn = connect(database)
    migrate(conn)
    conn.close()
    return ash_home


@pytest.fixture
def claude(httpx2_mock):
    return httpx2_mock.post(ANTHROPIC_MESSAGES).mock(
        return_value=httpx.Response(200, json=body("anthropic", "messages_text.json"))
    )


def write(home, config: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(config)


def doctor() -> tuple[int, dict[str, str]]:
    """Exit code and each check's line (with its hint) by check name."""
    result = CliRunner().invoke(cli, ["doctor"])
    lines: dict[str, str] = {}
    name = ""
    for line in result.output.splitlines():
        if line.startswith("       -> "):
            lines[name] += "\n" + line.strip()
            continue
        mark, _, rest = line.partition(" ")
        name = rest.strip().split(":", 1)[0]
        lines[name] = f"{mark} {rest.strip()}"
    return result.exit_code, lines


def test_a_working_setup_passes_every_check(configured, telegram, claude):
    code, lines = doctor()
    assert code == 0, lines
    assert all(line.startswith("ok") for line in lines.values()), lines
    assert not any("sk-ant-test" in line or TOKEN in line for line in lines.values())
    assert "@el_mon_test_bot (bot id 1276618370)" in lines["telegram token"]
    assert f"{HOOK}, 0 update(s) pending" in lines["webhook"]
    assert "anthropic claude-sonnet-4-6 at https://anthropic.test answered" in lines["default model"]
    assert claude.calls.last.request.read() and b'"max_tokens":1' in claude.calls.last.request.content
    assert "disabled ([sandbox] enabled = false)" in lines["sandbox"]
    assert "owner 408258968" in lines["allowed users"]


def test_no_docker_engine_with_sandbox_auto_is_a_warning_not_a_failure(configured, telegram, claude):
    write(configured, HEALTHY.replace("enabled = false", 'enabled = "auto"'))
    code, lines = doctor()
    assert code == 0
    assert lines["sandbox"].startswith("warn") and "the bash tool is not offered" in lines["sandbox"]
    assert "[sandbox] enabled = false" in lines["sandbox"]


def test_the_engine_without_the_sandbox_image_fails_with_the_build_command(
    configured, telegram, claude, tmp_path, monkeypatch
):
    write(configured, HEALTHY.replace("enabled = false", "enabled = true"))
    with FakeDockerEngine(tmp_path / "docker.sock") as engine:
        monkeypatch.setenv("DOCKER_HOST", engine.host)
        code, lines = doctor()
        assert code == 1
        assert "sandbox image ash-sandbox:latest is missing" in lines["sandbox"]
        assert "`ash sandbox build`" in lines["sandbox"]
        engine.images.add("ash-sandbox:latest")
        assert doctor()[1]["sandbox"].startswith("ok")


def test_a_wrong_model_name_fails_and_names_the_model(configured, telegram, monkeypatch, httpx2_mock):
    write(configured, HEALTHY + '[default_llm]\nprovider = "openai"\nmodel = "llama9"\n')
    monkeypatch.setenv("OPENAI_BASE_URL", f"{OLLAMA}/v1")
    route = httpx2_mock.post(f"{OLLAMA}/v1/chat/completions").mock(
        return_value=httpx.Response(404, json=body("openai", "error_404_model_not_found.http.json"))
    )
    code, lines = doctor()
    assert code == 1 and route.call_count == 1
    line = lines["default model"]
    assert line.startswith("FAIL default model: openai llama9 at http://127.0.0.1:11434: openai 404 model_not_found")
    assert "there is no model llama9 there" in line and "`ollama list`" in line
    assert "fallback model" not in lines  # no key: gpt-4o is not asked for


def test_a_model_server_that_is_down_fails_with_where_it_was_looked_for(configured, telegram, monkeypatch, httpx2_mock):
    write(configured, HEALTHY + '[default_llm]\nprovider = "openai"\nmodel = "llama3.2"\n')
    monkeypatch.setenv("OPENAI_BASE_URL", OLLAMA)
    httpx2_mock.post(f"{OLLAMA}/v1/chat/completions").mock(side_effect=httpx.ConnectError("connection refused"))
    code, lines = doctor()
    assert code == 1
    assert "start the server at http://127.0.0.1:11434, or correct OPENAI_BASE_URL" in lines["default model"]


def test_a_server_that_streams_when_asked_not_to_fails_the_check_instead_of_doctor(
    configured, telegram, monkeypatch, httpx2_mock
):
    write(configured, HEALTHY + '[default_llm]\nprovider = "openai"\nmodel = "llama3.2"\n')
    monkeypatch.setenv("OPENAI_BASE_URL", OLLAMA)
    sse = 'data: {"choices": [{"index": 0, "delta": {"content": "OK"}}]}\n\ndata: [DONE]\n\n'
    httpx2_mock.post(f"{OLLAMA}/v1/chat/completions").mock(
        return_value=httpx.Response(200, text=sse, headers={"content-type": "text/event-stream"})
    )
    code, lines = doctor()
    assert code == 1
    assert "did not answer with a chat completion" in lines["default model"]


def test_a_revoked_token_fails_and_the_webhook_is_not_asked(configured, respx_mock, claude):
    respx_mock.post(f"{TELEGRAM}/bot{TOKEN}/getMe").mock(
        return_value=httpx.Response(401, json=load("error_401_unauthorized.json"))
    )
    code, lines = doctor()
    assert code == 1
    assert lines["telegram token"].startswith("FAIL telegram token: Telegram refused the token (Unauthorized)")
    assert "@BotFather" in lines["telegram token"]
    assert "webhook" not in lines


def test_a_webhook_failing_now_fails_with_a_readable_time_and_the_fix(configured, telegram, claude):
    # The error text is Telegram's, as seen in public reports of a wrong secret.
    now = time.time()
    telegram.routes["getWebhookInfo"].mock(
        return_value=httpx.Response(
            200,
            json=webhook_info(
                pending_update_count=3,
                last_error_date=int(now) - 300,
                last_error_message="Wrong response from the webhook: 401 Unauthorized",
            ),
        )
    )
    code, lines = doctor()
    assert code == 1
    line = lines["webhook"]
    assert line.startswith(f"FAIL webhook: {HOOK}, 3 update(s) pending; last delivery error at ")
    assert "UTC (5 min ago): Wrong response from the webhook: 401 Unauthorized" in line
    assert f"`ash webhook set {HOOK}`" in line


def test_webhook_readings():
    now = 1_628_255_665 + 2 * 86400
    old_error = {
        "last_error_date": 1_628_255_665,
        "last_error_message": "Wrong response from the webhook: 404 Not Found",
    }
    history = webhook_check(webhook_info(**old_error)["result"], now)
    assert history.status == "warn"  # nothing pending: it recovered since
    assert "at 2021-08-06 13:14:25 UTC (2 days ago)" in history.detail
    assert "curl -sS https://ash.example.com/healthz" in history.hint

    elsewhere = webhook_check(webhook_info(url="https://ash.example.com/hook")["result"], now)
    assert elsewhere.status == "fail"
    assert elsewhere.hint == f"`ash webhook set {HOOK}`"

    none = webhook_check(load("getWebhookInfo_ok_webhook_set.json")["result"] | {"url": ""}, now)
    assert none.status == "warn" and "`ash relay`" in none.hint


def test_nobody_allowed_fails_until_someone_is(configured, telegram, claude):
    write(configured, HEALTHY.replace("owner = 408258968\n", ""))
    code, lines = doctor()
    assert code == 1
    assert "nobody may talk to Ash" in lines["allowed users"] and "`ash users allow ID`" in lines["allowed users"]
    assert CliRunner().invoke(cli, ["users", "allow", "1234567"]).exit_code == 0
    assert doctor()[1]["allowed users"] == "ok allowed users: 1 allowed: 1234567"


def test_private_files_readable_by_others_fail_with_chmod(configured, telegram, claude):
    secrets = configured / "secrets.env"
    secrets.write_text("TELEGRAM_BOT_TOKEN=x\n")
    os.chmod(secrets, 0o644)
    os.chmod(configured / "ash.db", 0o644)
    code, lines = doctor()
    assert code == 1
    assert f"-> chmod 600 {configured / 'ash.db'} {secrets}" in lines["file permissions"]


def test_missing_secrets_are_named_with_what_to_set(configured, monkeypatch):
    for name in ("TELEGRAM_BOT_TOKEN", "TELEGRAM_WEBHOOK_SECRET", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name)
    code, lines = doctor()
    assert code == 1
    assert "TELEGRAM_BOT_TOKEN is not set" in lines["telegram token"] and "@BotFather" in lines["telegram token"]
    assert "TELEGRAM_WEBHOOK_SECRET is not set" in lines["webhook secret"]
    assert lines["llm keys"].endswith("-> set ANTHROPIC_API_KEY")
    assert "default model" not in lines  # nothing to ask without a key


def test_doctor_and_db_status_create_neither_database_nor_folder(clean_env, monkeypatch, tmp_path, respx_mock):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    lines = doctor()[1]
    assert "does not exist yet" in lines["database"]
    status = CliRunner().invoke(cli, ["db", "status"])
    assert status.exit_code == 0 and "does not exist yet" in status.output
    assert "pending  m001_initial" in status.output
    assert not clean_env.exists()


def test_invalid_toml_names_the_line(ash_home, tmp_path, monkeypatch):
    write(ash_home, 'owner = 1\n[default_llm]\nmodel = "x"\ntemperature = 0,7\n')
    code, lines = doctor()
    assert code == 1
    assert "line 4 is not valid TOML" in lines["config"] and "temperature = 0,7" in lines["config"]
    assert "key named above" not in lines["config"]


def test_a_server_that_never_answers_costs_seconds_not_minutes(configured, monkeypatch):
    # Accepts connections (the kernel's backlog) and never answers: the worst case for a client.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    origin = f"http://127.0.0.1:{silent.getsockname()[1]}"
    monkeypatch.setenv("TELEGRAM_API_BASE", origin)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", origin)
    monkeypatch.setattr(doctor_remote, "TIMEOUT", 0.5)
    started = time.monotonic()
    code, lines = doctor()
    silent.close()
    assert code == 1 and time.monotonic() - started < 5
    assert lines["telegram token"].startswith("FAIL") and lines["default model"].startswith("FAIL")
    assert "timed out" in lines["default model"]
