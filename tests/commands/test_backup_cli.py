"""`ash backup`/`ash restore` round trip and the `ash memory` / `ash sessions` commands, via click's CliRunner."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from lib.commands.cli import cli
from lib.db import connect
from lib.memory import knowledge
from tests.support.memory_retrieval import open_db
from tests.support.memory_surfaces import make_settings, say


@pytest.fixture
def setup(ash_home):
    settings = make_settings(ash_home, '[embeddings]\nprovider = "none"\n[memory]\nextraction_enabled = false\n')
    conn = open_db(settings)
    say(conn, settings, "1001", "The wifi password at the cabin is larch-hollow", "Saved.")
    conn.close()
    return settings


def run(*args: str, input: str | None = None):
    result = CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)
    return result


def test_backup_then_restore_round_trip(setup, tmp_path):
    settings = setup
    backup_file = tmp_path / "snap.db"
    result = run("backup", str(backup_file))
    assert result.exit_code == 0, result.output
    assert backup_file.read_bytes().startswith(b"SQLite format 3\x00")
    # Refuses to overwrite without --force.
    again = run("backup", str(backup_file))
    assert again.exit_code == 1 and "--force" in again.output

    # Change the live database after the backup.
    assert run("memory", "add", "Bought a kayak").exit_code == 0
    conn = connect(settings.database_path)
    conn.execute("DELETE FROM messages")
    conn.close()

    restored = run("restore", str(backup_file), "--yes")
    assert restored.exit_code == 0, restored.output
    assert "previous database kept at" in restored.output

    conn = connect(settings.database_path)
    assert conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 2
    assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 0
    conn.close()
    kept = list(settings.database_path.parent.glob("ash.db.pre-restore-*.bak"))
    assert len(kept) == 1
    previous = connect(kept[0], readonly=True)
    assert previous.execute("SELECT content FROM memories").fetchone()[0] == "Bought a kayak"
    previous.close()


def test_restore_refuses_files_that_are_not_ash_databases(setup, tmp_path):
    not_sqlite = tmp_path / "notes.txt"
    not_sqlite.write_text("hello")
    result = run("restore", str(not_sqlite), "--yes")
    assert result.exit_code == 1 and "not a SQLite database" in result.output
    other = tmp_path / "other.db"
    conn = connect(other)
    conn.execute("CREATE TABLE things (x)")
    conn.close()
    result = run("restore", str(other), "--yes")
    assert result.exit_code == 1 and "not Ash's" in result.output
    assert run("restore", str(tmp_path / "missing.db"), "--yes").exit_code == 1


def test_restore_refuses_a_database_from_a_newer_ash(setup, tmp_path):
    """A backup with a migration step this version does not know is refused before anything changes."""
    settings = setup
    newer = tmp_path / "newer.db"
    assert run("backup", str(newer)).exit_code == 0
    conn = connect(newer)
    conn.execute("INSERT INTO schema_migrations (name, applied_at) VALUES ('m999_future', '2030-01-01T00:00:00Z')")
    conn.close()
    result = run("restore", str(newer), "--yes")
    assert result.exit_code == 1 and "newer version of Ash" in result.output
    live = connect(settings.database_path)
    assert live.execute("SELECT count(*) FROM schema_migrations WHERE name = 'm999_future'").fetchone()[0] == 0
    assert live.execute("SELECT count(*) FROM messages").fetchone()[0] == 2
    live.close()


def test_memory_commands(setup):
    added = run("memory", "add", "Allergic to penicillin", "--expires", "2999-01-01", "--subject", "health")
    assert added.exit_code == 0 and added.output.startswith("added #")
    memory_id = int(added.output.split("#")[1])
    assert "Allergic to penicillin" in run("memory", "list").output
    assert "Allergic to penicillin" in run("memory", "search", "penicillin").output
    assert "nothing found" in run("memory", "search", "zeppelin").output
    assert run("memory", "add", "Office closes at six", "--global").exit_code == 0
    stats = run("memory", "stats").output
    assert "entries: 2" in stats and "global: 1" in stats and "index:" in stats
    assert run("memory", "add", "x", "--expires", "soonish").exit_code == 1
    assert run("memory", "remove", str(memory_id)).exit_code == 0
    assert "no memory" in run("memory", "remove", str(memory_id)).output
    assert "expired: 0" in run("memory", "gc").output


def test_memory_reindex_rebuilds_the_index(setup):
    settings = setup
    conn = open_db(settings)
    knowledge.add(conn, settings, "Reindex me please", owner_user_id="1001")
    conn.execute("DELETE FROM search_chunks")
    conn.close()
    result = run("memory", "reindex")
    assert result.exit_code == 0 and "indexed 3" in result.output
    assert "Reindex me" in run("memory", "search", "reindex").output


def test_user_defaults_to_the_owner_and_errors_without_one(setup, ash_home):
    assert "no entries for user 1001" in run("memory", "list").output
    (ash_home / "config.toml").write_text('[embeddings]\nprovider = "none"\n')
    result = run("memory", "list")
    assert result.exit_code == 1 and "--user" in result.output
    assert run("memory", "list", "--user", "1001").exit_code == 0


def test_sessions_commands(setup, tmp_path):
    listed = run("sessions", "list").output
    assert "telegram:1001" in listed and "2 messages" in listed
    assert "larch-hollow" in run("sessions", "search", "cabin wifi").output
    out = tmp_path / "export.json"
    assert run("sessions", "export", "--user", "1001", "-o", str(out)).exit_code == 0
    data = json.loads(out.read_text())
    assert [m["role"] for m in data["messages"]] == ["user", "assistant"]
    one = json.loads(run("sessions", "export", "--session", str(data["sessions"][0]["id"])).output)
    assert one["messages"][0]["content"] == "The wifi password at the cabin is larch-hollow"
    assert run("sessions", "export", "--session", "999").exit_code == 1


@pytest.mark.parametrize("group", ["memory", "sessions"])
def test_every_command_has_help(group):
    command = cli.get_command(None, group)
    for name, sub in command.commands.items():
        assert sub.help, f"ash {group} {name} has no help"
    assert cli.get_command(None, "backup").help and cli.get_command(None, "restore").help
