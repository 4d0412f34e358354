"""`ash users timezone ID ZONE`: the zone a person's dates are shown in."""

from __future__ import annotations

from click.testing import CliRunner

from lib.agent.prompt import user_timezone
from lib.commands.cli import cli
from lib.config import load_settings
from lib.db import connect
from lib.memory.store import get_profile


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


def profile_of(db_path, user_id: str):
    conn = connect(db_path)
    try:
        return get_profile(conn, user_id)
    finally:
        conn.close()


def test_timezone_is_set_and_shapes_the_dates_in_their_prompts(db_path):
    result = run("users", "timezone", "2002", "America/Sao_Paulo")
    assert result.exit_code == 0, result.output
    assert "time zone of 2002 set to America/Sao_Paulo" in result.output
    profile = profile_of(db_path, "2002")
    assert str(user_timezone(load_settings(), profile)) == "America/Sao_Paulo"
    assert "timezone: America/Sao_Paulo" in run("users", "show", "2002").output


def test_unknown_zones_and_usernames_are_refused(db_path):
    unknown = run("users", "timezone", "2002", "Mars/Olympus_Mons")
    assert unknown.exit_code == 1 and "IANA name such as Europe/Berlin" in unknown.output
    assert run("users", "timezone", "2002", "../../etc/passwd").exit_code == 1
    # A person is given by numeric id everywhere in the CLI (a username can change hands).
    by_name = run("users", "timezone", "@alice", "UTC")
    assert by_name.exit_code == 2 and "not a Telegram user id" in by_name.output
    assert run("users", "timezone", "12 345", "UTC").exit_code == 2
    assert profile_of(db_path, "2002") is None
