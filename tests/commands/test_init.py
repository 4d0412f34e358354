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
    assert set(secrets) == {"TELEGRAM_BOT_TOKEN", "OPENAI_API_KEY", "TELEGRAM_WEBHOOK_SECRET", "ASH_ADMIN_TOKEN"} | {
        # The servers this shell named, kept for the next shell (which reads secrets.env itself).
        "TELEGRAM_API_BASE",
        "OPENAI_BASE_URL",
    }
    assert (
        len(secrets["TELEGRAM_WEBHOOK_SECRET"]) >= 32
        and secrets["ASH_ADMIN_TOKEN"] != secrets["TELEGRAM_WEBHOOK_SECRET"]
    )
    for name, value in secrets.items():
        if not name.endswith(("_BASE", "_BASE_URL")):  # servers' addresses are no secret
            assert value not in out and value not in first.stderr

    assert api.count("getMe") >= 1
    assert api.webhook == {
        "url": "https://ash.example.com/telegram/webhook",
        "secret_token": secrets["TELEGRAM_WEBHOOK_SECRET"],
    }
    assert "bot: @" in out and "the token works" in out
    assert f"owner: {OWNER}, always allowed" in out
    assert "next: " in out and " serve   (it reads data/secrets.env itself)" in out
    assert "fly secrets import < data/secrets.env" in out
    assert "fly ssh console -C 'ash init --yes --owner 408258968 --provider openai --model gpt-4.1-mini'" in out
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


# Anthropic's documented error body for a refused key (docs.claude.com/en/api/errors), written for
# these tests: no 401 has been recorded.
KEY_REFUSED = {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}


def test_a_refused_token_is_replaced_by_init_token(bot_env, api):
    api.fail["getMe"] = [Failure(401, {"ok": False, "error_code": 401, "description": "Unauthorized"})]
    refused = CliRunner().invoke(cli, ["init", "--yes", "--token", "111:refused-token-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"])
    assert refused.exit_code == 1 and "ash init --token TOKEN" in refused.output
    # The right token, given as a flag: it replaces the refused one (before, init kept the bad one).
    fixed = CliRunner().invoke(cli, ["init", "--yes", "--token", TOKEN])
    assert fixed.exit_code == 0, fixed.output
    assert read_secrets(bot_env / "secrets.env")["TELEGRAM_BOT_TOKEN"] == TOKEN
    assert "the token works" in fixed.output


def test_interactive_init_asks_again_for_a_token_telegram_refused(bot_env, api, monkeypatch):
    monkeypatch.delenv("TELEGRAM_BOT_TOKEN")
    (bot_env / "secrets.env").write_text("TELEGRAM_BOT_TOKEN=111:refused-token-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n")
    api.fail["getMe"] = [Failure(401, {"ok": False, "error_code": 401, "description": "Unauthorized"})]
    answers = "\n".join([OWNER, "", "", ANTHROPIC_KEY, TOKEN, ""]) + "\n"
    result = CliRunner().invoke(cli, ["init"], input=answers)
    assert result.exit_code == 0, result.output
    assert "Telegram refused the token (Unauthorized)" in result.output and "the token works" in result.output
    assert read_secrets(bot_env / "secrets.env")["TELEGRAM_BOT_TOKEN"] == TOKEN


def test_a_key_the_provider_refused_is_replaced_by_init_key(bot_env, api, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_BASE_URL", api.origin)
    api.fail["anthropic"] = [Failure(401, KEY_REFUSED)]
    refused = CliRunner().invoke(cli, ["init", "--yes", "--key", "sk-ant-wrong"])
    assert refused.exit_code == 1
    assert "refused ANTHROPIC_API_KEY" in refused.output and "ash init --key KEY" in refused.output
    fixed = CliRunner().invoke(cli, ["init", "--yes", "--key", ANTHROPIC_KEY])
    assert fixed.exit_code == 0, fixed.output
    assert read_secrets(bot_env / "secrets.env")["ANTHROPIC_API_KEY"] == ANTHROPIC_KEY


def test_base_url_round_trips_into_a_new_shell(tmp_path, api):
    home = tmp_path / "data"
    made = ash(
        home,
        api,
        "init",
        "--yes",
        "--provider",
        "openai",
        "--model",
        "llama3.2",
        "--base-url",
        "http://127.0.0.1:11434/v1",
    )
    assert made.returncode in (0, 1), made.stderr  # no server at that address: the doctor says so
    assert read_secrets(home / "secrets.env")["OPENAI_BASE_URL"] == "http://127.0.0.1:11434/v1"
    # A new shell, with nothing of Ash's in its environment: the server and every command read it.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ASH_", "TELEGRAM_", "ANTHROPIC_", "OPENAI_"))}
    probe = "from lib.config import load_settings; s = load_settings(); print(s.secrets.openai_base_url)"
    seen = subprocess.run(
        [str(ASH.parent / "python"), "-c", probe], env={**env, "ASH_HOME": str(home)}, capture_output=True, text=True
    )
    assert seen.stdout.strip() == "http://127.0.0.1:11434", seen.stderr


def test_an_openai_key_alone_makes_a_fresh_setup_use_openai(bot_env, api, monkeypatch):
    # Fly's first `ash init` on the machine: only OPENAI_API_KEY among the secrets it was given.
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9")
    result = CliRunner().invoke(cli, ["init", "--yes", "--owner", OWNER])
    assert config_of(bot_env)["default_llm"]["provider"] == "openai", result.output


def test_init_refuses_a_blank_model_and_says_when_no_config_was_written(bot_env, api):
    blank = CliRunner().invoke(cli, ["init", "--yes", "--model", ""])
    assert blank.exit_code == 2 and "give the model's name" in blank.output
    nothing = CliRunner().invoke(cli, ["init", "--yes"])
    assert "config: none written (the defaults" in nothing.output and "(unchanged)" not in nothing.output.split("\n")[0]
