"""What a newcomer tripped over in the CLI, each as it happened to them (issue: the product pass).

- `ash webhook set https://ash.example.com` registered the bare origin; `ash init` appends the path.
- `--user abc` was accepted by some commands (`ash memory list` answered "no entries for user
  abc") and refused by others; a group's negative id too.
- `ash users allow -100123` said "No such option '-1'".
- `ash users list` did not exist (it is `show`).
- `ash backup /nonexistent/dir/x.db` created the folder.
"""

from __future__ import annotations

import json

import click
import httpx
import pytest
import respx
from click.testing import CliRunner

from lib.commands.cli import cli
from lib.commands.common import USER_ID
from tests.support.telegram import API, SECRET, TOKEN, load


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_webhook_set_with_a_bare_origin_registers_the_webhook_path(db_path, monkeypatch):
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", TOKEN)
    monkeypatch.setenv("TELEGRAM_WEBHOOK_SECRET", SECRET)
    monkeypatch.setenv("TELEGRAM_API_BASE", API)
    with respx.mock() as router:
        route = router.post(f"{API}/bot{TOKEN}/setWebhook").mock(
            return_value=httpx.Response(200, json=load("setWebhook_ok_webhook_was_set.json"))
        )
        router.post(f"{API}/bot{TOKEN}/setMyCommands").mock(return_value=httpx.Response(200, json={"ok": True}))
        result = run("webhook", "set", "https://ash.example.com/")
    assert result.exit_code == 0, result.output
    assert json.loads(route.calls.last.request.content)["url"] == "https://ash.example.com/telegram/webhook"
    refused = run("webhook", "set", "http://ash.example.com")
    assert refused.exit_code == 2 and "https://" in refused.output


def _user_options(group: click.Group, ctx: click.Context, path: tuple[str, ...] = ()):
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            yield from _user_options(command, ctx, (*path, name))
        for param in command.params:
            if "--user" in getattr(param, "opts", ()):
                yield " ".join((*path, name)), param


def test_every_user_option_takes_the_same_kind_of_id():
    found = dict(_user_options(cli, click.Context(cli)))
    assert {"memory list", "usage", "sessions list", "mcp token create", "schedule add"} <= set(found)
    loose = [name for name, param in found.items() if param.type is not USER_ID]
    assert loose == []


@pytest.mark.parametrize("args", [["memory", "list"], ["usage"], ["sessions", "export"], ["schedule", "list"]])
@pytest.mark.parametrize(("given", "why"), [("abc", "not a Telegram user id"), ("-100123", "group or channel id")])
def test_a_user_option_that_is_no_persons_id_is_refused_with_the_reason(db_path, args, given, why):
    result = run(*args, "--user", given)
    assert result.exit_code == 2 and why in result.output


def test_allowing_a_group_id_says_why_not(db_path):
    result = run("users", "allow", "-100123")
    assert result.exit_code == 1 and "is a group or channel id" in result.output


def test_users_list_lists(db_path, monkeypatch):
    assert run("users", "allow", "12345").exit_code == 0
    listed = run("users", "list")
    assert listed.exit_code == 0 and "12345" in listed.output
    assert listed.output == run("users", "show").output


def test_a_backup_into_a_folder_that_does_not_exist_creates_nothing(db_path, tmp_path):
    target = tmp_path / "no" / "such" / "x.db"
    result = run("backup", str(target))
    assert result.exit_code == 1 and "does not exist" in result.output
    assert not (tmp_path / "no").exists()


def test_an_export_and_the_data_folder_are_the_owners_only(clean_env, tmp_path):
    # The data folder is created by the first command that needs it (here: the database).
    assert not clean_env.exists()
    assert run("users", "allow", "12345").exit_code == 0
    assert clean_env.stat().st_mode & 0o777 == 0o700
    out = tmp_path / "export.json"
    out.write_text("old, world-readable")
    out.chmod(0o644)
    result = run("sessions", "export", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert out.stat().st_mode & 0o777 == 0o600 and '"sessions"' in out.read_text()


def test_a_task_for_someone_not_allowed_is_refused(db_path):
    refused = run("schedule", "add", "--at", "in 1 hour", "--user", "424242", "water the plants")
    assert refused.exit_code == 1 and "ash users allow 424242" in refused.output
    assert run("users", "allow", "424242").exit_code == 0
    assert run("schedule", "add", "--at", "in 1 hour", "--user", "424242", "water the plants").exit_code == 0


def test_a_command_run_from_another_directory_uses_the_same_home_and_creates_nothing(monkeypatch, tmp_path):
    from lib.config import settings as config_settings

    home = tmp_path / "checkout" / "data"
    monkeypatch.delenv("ASH_HOME")
    monkeypatch.setattr(config_settings, "default_home", lambda: home)
    (tmp_path / "somewhere").mkdir()
    monkeypatch.chdir(tmp_path / "somewhere")
    shown = run("users", "show")
    assert shown.exit_code == 1
    assert f"no Ash database at {home / 'ash.db'}" in shown.output and "the default" in shown.output
    for command in (["memory", "list", "--user", "1"], ["sessions", "list"], ["usage"], ["schedule", "list"]):
        assert run(*command).exit_code == 1
    assert not home.exists() and not (tmp_path / "somewhere" / "data").exists()
    # A command that stores what it is asked to makes the database, in that home, and says so.
    allowed = run("users", "allow", "12345")
    assert allowed.exit_code == 0 and f"new database at {home / 'ash.db'}" in allowed.stderr
    assert run("users", "show").output.startswith("12345")


def test_secrets_env_is_read_by_every_command_and_the_environment_wins(ash_home, monkeypatch):
    from lib.commands.doctor_checks import check_webhook_secret
    from lib.config import load_settings

    (ash_home / "secrets.env").write_text(
        "# written by ash init\nTELEGRAM_WEBHOOK_SECRET=from-the-file-0123456789\nexport ASH_ADMIN_TOKEN='with space'\n"
        "OPENAI_BASE_URL=http://127.0.0.1:11434/v1\nPATH=/nowhere\n"
    )
    secrets = load_settings().secrets
    assert secrets.telegram_webhook_secret == "from-the-file-0123456789"
    assert secrets.admin_token == "with space" and secrets.openai_base_url == "http://127.0.0.1:11434"
    monkeypatch.setenv("TELEGRAM_WEBHOOK_SECRET", "from-the-environment-0123")
    monkeypatch.setenv("ASH_ADMIN_TOKEN", "  ")  # blank: the file's stands
    secrets = load_settings().secrets
    assert secrets.telegram_webhook_secret == "from-the-environment-0123" and secrets.admin_token == "with space"
    # A new shell's `ash doctor` finds it: no advice to make a new one.
    monkeypatch.delenv("TELEGRAM_WEBHOOK_SECRET")
    check = check_webhook_secret(load_settings())
    assert (check.status, check.detail) == ("ok", "set")
