"""Who may talk to Ash: ids and usernames checked as Telegram defines them, access taken away with
a denial that wins over config.toml, and a config @name that stops counting once it is removed."""

from __future__ import annotations

import httpx
import pytest
from click.testing import CliRunner

from lib.commands.cli import cli
from lib.config import load_settings
from lib.conversation.access import allow, deny, is_allowed, parse_entry
from lib.db import connect
from lib.errors import InvalidUserEntry, OwnerProtected
from lib.memory import store
from lib.telegram.updates import telegram_worker
from tests.support.telegram import deliver, echo_runner, make_runtime, point_at_fake_bot_api, private_text

OWNER = 1001
ALICE = 2002
BOB = 3003


def settings_with(home, text: str):
    home.joinpath("config.toml").write_text(text)
    return load_settings()


@pytest.mark.parametrize(
    ("typed", "entry"),
    [
        ("123456789", "123456789"),
        (" 42 ", "42"),
        ("4503599627370495", "4503599627370495"),  # 2**52 - 1: the Bot API's largest user id
        ("@Alice_1", "@alice_1"),
        ("alice", "@alice"),
        ("@abcd", "@abcd"),  # four letters: a collectible username
        ("@" + "a" * 32, "@" + "a" * 32),
    ],
)
def test_ids_and_usernames_telegram_allows_are_accepted(typed, entry):
    assert parse_entry(typed) == entry


@pytest.mark.parametrize(
    "typed",
    [
        "12345678O",  # a letter O among the digits
        "12 345",
        "0",
        "-1001234567890",  # a group's id
        "4503599627370496",  # past 52 bits
        "@al",  # too short
        "@" + "a" * 33,  # too long
        "@1alice",  # starts with a digit
        "@alice_",  # ends with an underscore
        "@alice-b",
        "@",
        "١٢٣",  # digits, but not ASCII ones
    ],
)
def test_ids_and_usernames_telegram_never_issues_are_refused(typed):
    with pytest.raises(InvalidUserEntry):
        parse_entry(typed)


@pytest.mark.parametrize("typed", ["12345678O", "12 345", "@al", "0"])
def test_users_allow_refuses_what_telegram_never_issues_and_stores_nothing(db_path, typed):
    result = CliRunner().invoke(cli, ["users", "allow", typed])
    assert result.exit_code == 1
    assert "Error:" in result.output and "Traceback" not in result.output
    conn = connect(db_path)
    assert conn.execute("SELECT count(*) FROM allowed_users").fetchone()[0] == 0
    conn.close()


def test_a_denial_wins_over_config_until_the_person_is_allowed_again(ash_home, conn):
    settings = settings_with(ash_home, f"owner = {OWNER}\n[telegram]\nallowed_users = [{ALICE}]\n")
    assert is_allowed(conn, settings, ALICE, "alice")
    denied = deny(conn, settings, str(ALICE))
    assert denied.in_config
    assert not is_allowed(conn, settings, ALICE, "alice")
    lifted = allow(conn, str(ALICE))
    assert lifted.lifted
    assert is_allowed(conn, settings, ALICE, "alice")


def test_denying_a_pinned_username_denies_that_person_and_allowing_it_lets_them_back(ash_home, conn):
    settings = settings_with(ash_home, f"owner = {OWNER}\n")
    allow(conn, "@alice")
    assert is_allowed(conn, settings, ALICE, "alice")  # pins @alice to ALICE
    denied = deny(conn, settings, "@Alice")
    assert (denied.entry, denied.user_id) == ("@alice", str(ALICE))
    assert not is_allowed(conn, settings, ALICE, "alice")
    assert not is_allowed(conn, settings, ALICE, "alice_renamed")  # the person, not only the name
    allow(conn, "@alice")
    assert is_allowed(conn, settings, ALICE, "alice")
    assert not is_allowed(conn, settings, BOB, "alice")  # the pin survived: the name is still Alice's


def test_a_denied_username_refuses_whoever_writes_with_it(ash_home, conn):
    settings = settings_with(ash_home, f"owner = {OWNER}\n[telegram]\nallowed_users = [{BOB}]\n")
    deny(conn, settings, "@bobby")
    assert not is_allowed(conn, settings, BOB, "bobby")
    assert is_allowed(conn, settings, BOB, "robert")


def test_the_owner_cannot_be_denied_by_id_or_by_username(ash_home, conn):
    settings = settings_with(ash_home, f"owner = {OWNER}\n")
    store.touch_profile(conn, str(OWNER), "theowner", "Owner")
    with pytest.raises(OwnerProtected):
        deny(conn, settings, str(OWNER))
    with pytest.raises(OwnerProtected):
        deny(conn, settings, "@TheOwner")
    assert is_allowed(conn, settings, OWNER, "theowner")
    assert conn.execute("SELECT count(*) FROM denied_users").fetchone()[0] == 0


def test_a_username_removed_from_config_stops_letting_its_pinned_person_in(ash_home, conn):
    before = settings_with(ash_home, f"owner = {OWNER}\n[telegram]\nallowed_users = ['@alice']\n")
    assert is_allowed(conn, before, ALICE, "alice")  # pinned at first contact
    after = settings_with(ash_home, f"owner = {OWNER}\n[telegram]\nallowed_users = []\n")
    assert not is_allowed(conn, after, ALICE, "alice")
    again = settings_with(ash_home, f"owner = {OWNER}\n[telegram]\nallowed_users = ['@alice']\n")
    assert is_allowed(conn, again, ALICE, "alice")
    assert not is_allowed(conn, again, BOB, "alice")  # listed again, the old pin still holds


def test_users_deny_cli_refuses_the_owner_and_reports_config(db_path, ash_home):
    ash_home.joinpath("config.toml").write_text(f"owner = {OWNER}\n[telegram]\nallowed_users = [{ALICE}]\n")
    owner = CliRunner().invoke(cli, ["users", "deny", str(OWNER)])
    assert owner.exit_code == 1 and "always has access" in owner.output
    denied = CliRunner().invoke(cli, ["users", "deny", str(ALICE)])
    assert denied.exit_code == 0, denied.output
    assert f"denied {ALICE}" in denied.output and "config.toml still lists them" in denied.output
    assert f"{ALICE}  (denied since" in CliRunner().invoke(cli, ["users", "show"]).output


async def test_a_denied_person_is_no_longer_answered_and_their_data_is_kept(db_path, ash_home, monkeypatch, bot):
    point_at_fake_bot_api(monkeypatch, ash_home, f"owner = {OWNER}\n[telegram]\nallowed_users = [{ALICE}]\n")
    conn = connect(db_path)
    store.set_notes(conn, str(ALICE), "Likes genmaicha.")
    conn.close()
    async with httpx.AsyncClient() as http:
        runtime = make_runtime(http)
        worker = telegram_worker(runtime, runner=echo_runner())
        deliver(runtime, private_text(50, "remember me", user_id=ALICE, username="alice"))
        await worker.drain()
        assert CliRunner().invoke(cli, ["users", "deny", str(ALICE)]).exit_code == 0
        deliver(runtime, private_text(51, "still there?", user_id=ALICE, username="alice"))
        await worker.drain()
    replies = [m["text"] for m in bot.sent_to(ALICE)]
    assert replies[0] == "You said: remember me"
    assert len(replies) == 2 and replies[1].startswith("Sorry, I only talk to people my owner has allowed")
    conn = connect(db_path)
    profile = store.get_profile(conn, str(ALICE))
    conn.close()
    assert profile is not None and profile.notes == "Likes genmaicha."
