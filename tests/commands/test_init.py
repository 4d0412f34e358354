"""`ash init`: config.toml, secrets.env (0600, never printed), the owner, getMe, the webhook and the
doctor's verdict, run for real against a loopback Bot API; a second run changes only what it is asked."""

from __future__ import annotations

import os
import stat
import subprocess
import tomllib

import pytest
from click.testing import CliRunner

from lib.commands.cli import cli
from lib.commands.init_files import read_secrets, set_key, update_config
from tests.support.bot_api import PollingBotAPI
from tests.support.faults import ASH, Failure
from tests.support.telegram import TOKEN

OWNER = "408258968"
OPENAI_KEY = "sk-test-openai-key-0123456789"
ANTHROPIC_KEY = "sk-ant-test-key-0123456789"


@pytest.fixture
def api():
    with PollingBotAPI() as stub:
        yield stub


@pytest.fixture
def bot_env(monkeypatch, ash_home, api, tmp_path):
    """A token for the loopback Bot API, no Docker engine (its check fails fast), cwd in tmp_path."""
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", TOKEN)
    monkeypatch.setenv("TELEGRAM_API_BASE", api.origin)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    monkeypatch.chdir(tmp_path)
    return ash_home


def ash(home, api, *args: str) -> subprocess.CompletedProcess:
    """`ash ARGS` as a separate process, as a script would run it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ASH_", "TELEGRAM_", "ANTHROPIC_", "OPENAI_"))}
    env.update(
        ASH_HOME=str(home),
        TELEGRAM_BOT_TOKEN=TOKEN,
        TELEGRAM_API_BASE=api.origin,
        OPENAI_API_KEY=OPENAI_KEY,
        # Doctor asks each model for a token: a closed loopback port, never the real API.
        OPENAI_BASE_URL="http://127.0.0.1:9",
        DOCKER_HOST=f"unix://{home}/no-docker.sock",
    )
    return subprocess.run([str(ASH), *args], env=env, cwd=home.parent, capture_output=True, text=True, timeout=60)


def config_of(home) -> dict:
    return tomllib.loads((home / "config.toml").read_text())


def test_init_yes_sets_everything_up_then_a_second_run_changes_only_the_model(tmp_path, api):
    home = tmp_path / "data"
    first = ash(
        home,
        api,
        "init",
        "--yes",
        "--owner",
        OWNER,
        "--webhook-url",
        "https://ash.example.com",
        "--provider",
        "openai",
        "--model",
        "gpt-4.1-mini",
    )
    assert first.returncode == 0, first.stdout + first.stderr
    out = first.stdout

    assert config_of(home) == {"owner": int(OWNER), "default_llm": {"provider": "openai", "model": "gpt-4.1-mini"}}
    secrets_file = home / "secrets.env"
    assert stat.S_IMODE(secrets_file.stat().st_mode) == 0o600
    secrets = read_secrets(secrets_file)
    assert set(secrets) == {"TELEGRAM_BOT_TOKEN", "OPENAI_API_KEY", "TELEGRAM_WEBHOOK_SECRET", "ASH_ADMIN_TOKEN"}
    assert (
        len(secrets["TELEGRAM_WEBHOOK_SECRET"]) >= 32
        and secrets["ASH_ADMIN_TOKEN"] != secrets["TELEGRAM_WEBHOOK_SECRET"]
    )
    for value in secrets.values():
        assert value not in out and value not in first.stderr

    assert api.count("getMe") >= 1
    assert api.webhook == {
        "url": "https://ash.example.com/telegram/webhook",
        "secret_token": secrets["TELEGRAM_WEBHOOK_SECRET"],
    }
    assert "bot: @" in out and "the token works" in out
    assert f"owner: {OWNER}, always allowed" in out
    assert "set -a; . data/secrets.env; set +a" in out
    assert 'fly secrets set TELEGRAM_BOT_TOKEN="$TELEGRAM_BOT_TOKEN"' in out
    doctor = out.split("ash doctor:")[1]  # the doctor's checks, with secrets.env loaded
    assert "ok   webhook secret" in doctor and "ok   database" in doctor  # init migrated it
    assert "\nverdict: " in doctor

    before = secrets_file.read_bytes()
    second = ash(home, api, "init", "--yes", "--model", "gpt-4o-mini")
    assert second.returncode == 0, second.stdout + second.stderr
    assert config_of(home) == {"owner": int(OWNER), "default_llm": {"provider": "openai", "model": "gpt-4o-mini"}}
    assert secrets_file.read_bytes() == before
    assert api.count("setWebhook") == 1
    assert (
        "(set model)" in second.stdout
        and "webhook: https://ash.example.com/telegram/webhook (unchanged)" in second.stdout
    )


def test_interactive_init_asks_hides_secrets_and_reasks_a_bad_id(bot_env, api, monkeypatch):
    monkeypatch.delenv("TELEGRAM_BOT_TOKEN")
    answers = "\n".join([TOKEN, "12345678O", OWNER, "", "", ANTHROPIC_KEY, ""]) + "\n"
    result = CliRunner().invoke(cli, ["init"], input=answers)
    assert result.exit_code == 0, result.output
    assert "is neither a numeric Telegram id" in result.output  # then asked again
    assert TOKEN not in result.output and ANTHROPIC_KEY not in result.output
    # Enter kept the provider and model: only the owner was written.
    assert config_of(bot_env) == {"owner": int(OWNER)}
    secrets = read_secrets(bot_env / "secrets.env")
    assert secrets["TELEGRAM_BOT_TOKEN"] == TOKEN and secrets["ANTHROPIC_API_KEY"] == ANTHROPIC_KEY
    assert "webhook: none; with no public https URL, run `ash relay`" in result.output
    assert api.count("setWebhook") == 0


def test_a_refused_token_is_reported_and_fails_the_run(bot_env, api):
    api.fail["getMe"] = [Failure(401, {"ok": False, "error_code": 401, "description": "Unauthorized"})]
    result = CliRunner().invoke(cli, ["init", "--yes", "--webhook-url", "https://ash.example.com/telegram/webhook"])
    assert result.exit_code == 1
    assert "Telegram refused the token (Unauthorized)" in result.output
    assert "verdict:" in result.output
    assert api.count("setWebhook") == 0


def test_bad_flags_are_refused_before_anything_is_written(bot_env, api):
    result = CliRunner().invoke(cli, ["init", "--yes", "--webhook-url", "http://ash.example.com/telegram/webhook"])
    assert result.exit_code == 2 and "only to https:// URLs" in result.output
    result = CliRunner().invoke(cli, ["init", "--yes", "--owner", "@alice"])
    assert result.exit_code == 2 and "numeric id" in result.output
    assert CliRunner().invoke(cli, ["init", "--yes", "--owner", "0"]).exit_code == 2
    assert not (bot_env / "config.toml").exists() and not (bot_env / "secrets.env").exists()
    assert api.count("getMe") == 0


def test_a_loose_existing_secrets_file_is_kept_and_made_private(bot_env, api):
    secrets_file = bot_env / "secrets.env"
    secrets_file.write_text("export TELEGRAM_WEBHOOK_SECRET='kept-secret-0123456789abcdef'  # mine\n")
    secrets_file.chmod(0o644)
    result = CliRunner().invoke(cli, ["init", "--yes"])
    assert result.exit_code == 0, result.output
    assert stat.S_IMODE(secrets_file.stat().st_mode) == 0o600
    assert read_secrets(secrets_file)["TELEGRAM_WEBHOOK_SECRET"] == "kept-secret-0123456789abcdef"


def test_config_edits_keep_everything_else_as_written(tmp_path):
    text = (
        "# my notes\nowner = 1\ntimezone = 'Europe/Lisbon'  # home\n\n"
        "[telegram]\nallowed_users = [5, 6]\n\n[default_llm]\n# the answering model\nprovider = 'anthropic'\n"
    )
    edited = set_key(set_key(text, None, "owner", 408258968), "default_llm", "model", "claude-haiku-4-5")
    assert edited.startswith("# my notes\nowner = 408258968\ntimezone = 'Europe/Lisbon'  # home\n")
    assert "[default_llm]\n# the answering model\nprovider = 'anthropic'\nmodel = \"claude-haiku-4-5\"\n" in edited
    path = tmp_path / "config.toml"
    path.write_text(text)
    config = update_config(path, {("server", "port"): 9000})
    assert config.server.port == 9000 and config.telegram.allowed_users == [5, 6]
    assert path.read_text().endswith("\n[server]\nport = 9000\n")
