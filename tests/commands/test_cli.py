"""The `ash` command: every command has help; the database commands work on a real file."""

import subprocess

import click
import pytest
from click.testing import CliRunner

from lib.commands.cli import cli
from tests.support.paths import REPO

EXPECTED_GROUPS = {
    "serve",
    "chat",
    "doctor",
    "db",
    "users",
    "memory",
    "sessions",
    "usage",
    "webhook",
    "sandbox",
    "backup",
    "restore",
}


def walk(group: click.Group, prefix: tuple[str, ...] = ()):
    for name in group.list_commands(click.Context(group)):
        command = group.get_command(click.Context(group), name)
        path = (*prefix, name)
        yield path, command
        if isinstance(command, click.Group):
            yield from walk(command, path)


COMMANDS = list(walk(cli))


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_every_command_has_help(path, command):
    assert command.help and command.help.strip(), f"ash {' '.join(path)} has no docstring"
    result = CliRunner().invoke(cli, [*path, "--help"], prog_name="ash")
    assert result.exit_code == 0, result.output
    assert "Usage: ash " + " ".join(path) in result.output


def test_top_level_help_lists_the_command_groups():
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    listed = {line.split()[0] for line in result.output.split("Commands:")[1].splitlines() if line.strip()}
    assert listed >= EXPECTED_GROUPS


def test_installed_console_script_runs():
    result = subprocess.run([str(REPO / ".venv" / "bin" / "ash"), "--help"], capture_output=True, text=True)
    assert result.returncode == 0
    assert "Commands:" in result.stdout


def test_db_migrate_then_status(ash_home):
    runner = CliRunner()
    first = runner.invoke(cli, ["db", "migrate"])
    assert first.exit_code == 0, first.output
    assert "applied: m001_initial" in first.output
    assert "up to date" in runner.invoke(cli, ["db", "migrate"]).output
    status = runner.invoke(cli, ["db", "status"])
    assert "applied  m001_initial" in status.output
    assert "pending" not in status.output


def test_config_errors_are_reported_without_a_traceback(ash_home):
    (ash_home / "config.toml").write_text("[server]\nport = 'x'\n")
    result = CliRunner().invoke(cli, ["db", "migrate"])
    assert result.exit_code == 1
    assert "Error: " in result.output and "`server.port`" in result.output
    assert "Traceback" not in result.output
