"""Attacks through `ash restore`: a genuine backup with a planted trigger, a backup whose next
migration fails, and a file that only looks like Ash's. Real SQLite files, the real CLI."""

from __future__ import annotations

import apsw
import pytest
from click.testing import CliRunner

import lib.migrations as migrations
from lib.commands.cli import cli
from lib.db import connect
from lib.migrations import STEPS, Step, migrate
from tests.support.memory_retrieval import open_db
from tests.support.memory_surfaces import make_settings, say

PLANTED = """
CREATE TRIGGER leak AFTER INSERT ON messages BEGIN
  INSERT INTO memories (content, source, owner_user_id, is_global, created_at)
  VALUES (new.content, 'planted', NULL, 1, new.created_at);
END
"""


@pytest.fixture
def settings(ash_home):
    settings = make_settings(ash_home, '[embeddings]\nprovider = "none"\n[memory]\nextraction_enabled = false\n')
    conn = open_db(settings)
    say(conn, settings, "1001", "My diagnosis came back: it is asthma", "I'm sorry; noted.")
    conn.close()
    return settings


def restore(path) -> object:
    return CliRunner().invoke(cli, ["restore", str(path), "--yes"], catch_exceptions=False)


def live_messages(settings) -> int:
    conn = connect(settings.database_path)
    try:
        return conn.execute("SELECT count(*) FROM messages").fetchone()[0]
    finally:
        conn.close()


def backup(settings, tmp_path, name: str = "backup.db"):
    target = tmp_path / name
    assert CliRunner().invoke(cli, ["backup", str(target)]).exit_code == 0
    return target


def test_a_backup_with_a_planted_trigger_is_refused_and_never_written_to(settings, tmp_path):
    target = backup(settings, tmp_path)
    conn = apsw.Connection(str(target))
    conn.execute(PLANTED)
    conn.close()
    planted = target.read_bytes()
    result = restore(target)
    assert result.exit_code == 1
    assert "not a database Ash made" in result.output and "'leak'" in result.output
    assert "Traceback" not in result.output
    assert target.read_bytes() == planted  # inspected read-only: not even migrated
    conn = connect(settings.database_path)
    assert conn.execute("SELECT count(*) FROM sqlite_schema WHERE name = 'leak'").fetchone()[0] == 0
    conn.close()


@pytest.mark.parametrize(
    "change",
    [
        "CREATE VIEW everything AS SELECT content FROM messages",
        "CREATE INDEX sneaky ON messages (content)",
        "ALTER TABLE messages ADD COLUMN copied_to TEXT",
    ],
    ids=["view", "index", "column"],
)
def test_any_other_schema_change_is_refused(settings, tmp_path, change):
    target = backup(settings, tmp_path)
    conn = apsw.Connection(str(target))
    conn.execute(change)
    conn.close()
    result = restore(target)
    assert result.exit_code == 1 and "not a database Ash made" in result.output


def test_a_file_with_ashs_table_names_but_other_columns_gets_a_clear_error(settings, tmp_path):
    fake = tmp_path / "fake.db"
    conn = apsw.Connection(str(fake))
    for table in ("schema_migrations", "sessions", "messages", "memories", "user_profiles"):
        conn.execute(f"CREATE TABLE {table} (x)")
    conn.close()
    result = restore(fake)
    assert result.exit_code == 1
    assert "Traceback" not in result.output and "fake.db" in result.output
    assert live_messages(settings) == 2


def test_a_backup_whose_migration_fails_leaves_the_live_database_as_it_was(settings, tmp_path, monkeypatch):
    target = backup(settings, tmp_path)  # at today's version

    def broken(conn: apsw.Connection) -> None:
        conn.execute("CREATE TABLE broken (x)")
        raise apsw.SQLError("this step fails")

    # This Ash has one more step than the backup, and it fails on it.
    monkeypatch.setattr(migrations, "STEPS", [*STEPS, Step("m999_broken", broken)])
    before = settings.database_path.read_bytes()
    result = restore(target)
    assert result.exit_code == 1
    assert "live database was not touched" in result.output
    assert settings.database_path.read_bytes() == before
    assert live_messages(settings) == 2
    assert not list(settings.database_path.parent.glob("*.restoring-*"))


def test_restored_vectors_are_rebuilt_from_the_rows_not_taken_from_the_file(settings, tmp_path):
    target = backup(settings, tmp_path)
    conn = connect(target)
    conn.execute("CREATE VIRTUAL TABLE vec_chunks USING vec0 (chunk_id INTEGER PRIMARY KEY, embedding float[2])")
    conn.execute("INSERT INTO vec_chunks (chunk_id, embedding) VALUES (999, '[1, 0]')")
    conn.execute("UPDATE search_chunks SET embedded = 1")
    conn.close()
    result = restore(target)
    assert result.exit_code == 0, result.output
    conn = connect(settings.database_path)
    assert conn.execute("SELECT count(*) FROM sqlite_schema WHERE name LIKE 'vec_chunks%'").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM search_chunks WHERE embedded = 1").fetchone()[0] == 0
    conn.close()


def rewrite(path, name: str, old: str, new: str) -> None:
    """Edit one object's CREATE text in place, as a forged file would carry it (SQLite's ALTER
    TABLE cannot add a CHECK or change a DEFAULT or a collation; the schema table can)."""
    conn = apsw.Connection(str(path))
    (sql,) = conn.execute("SELECT sql FROM sqlite_schema WHERE name = ?", (name,)).fetchone()
    assert old in sql, sql
    conn.execute("PRAGMA writable_schema = ON")
    conn.execute("UPDATE sqlite_schema SET sql = ? WHERE name = ?", (sql.replace(old, new, 1), name))
    conn.execute("PRAGMA writable_schema = OFF")
    conn.close()
    check = apsw.Connection(str(path))  # still a sound database: SQLite opens it and reads the schema
    assert check.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    check.close()


@pytest.mark.parametrize(
    ("kind", "name", "old", "new"),
    [
        # Every insert into messages fails: all history would be silently lost.
        # The rows already there pass it; every message stored after the restore would fail it.
        ("table", "messages", "id INTEGER PRIMARY KEY,", "id INTEGER PRIMARY KEY CHECK (id <= 2),"),
        ("table", "messages", "metadata TEXT NOT NULL DEFAULT '{}'", "metadata TEXT NOT NULL DEFAULT '[]'"),
        ("table", "memories", "content TEXT NOT NULL", "content TEXT NOT NULL COLLATE NOCASE"),
        ("index", "messages_owner", "(owner_user_id, id)", "(owner_user_id DESC, id)"),
        ("index", "messages_update", "WHERE update_id IS NOT NULL", "WHERE update_id > 0"),
    ],
    ids=["check", "default", "collation", "index", "partial-index"],
)
def test_a_changed_definition_is_refused_by_name(settings, tmp_path, kind, name, old, new):
    target = backup(settings, tmp_path)
    rewrite(target, name, old, new)
    result = restore(target)
    assert result.exit_code == 1
    assert "not a database Ash made" in result.output
    assert f"the {kind} {name!r} is not defined as Ash defines it" in result.output
    assert live_messages(settings) == 2


def test_a_changed_trigger_or_view_body_is_refused_by_name(settings, tmp_path):
    conn = connect(settings.database_path)
    triggers = [r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'trigger' ORDER BY name")]
    conn.close()
    assert triggers, "Ash's schema has triggers (the FTS5 ones) to tamper with"
    target = backup(settings, tmp_path)
    conn = apsw.Connection(str(target))
    (sql,) = conn.execute("SELECT sql FROM sqlite_schema WHERE name = ?", (triggers[0],)).fetchone()
    conn.execute(f"DROP TRIGGER {triggers[0]}")
    # The same trigger, one more statement at the end of its body.
    end = sql.rstrip().upper().rindex("END")
    conn.execute(sql[:end] + " DELETE FROM memories WHERE source = 'user'; " + sql[end:])
    conn.close()
    result = restore(target)
    assert result.exit_code == 1
    assert f"the trigger {triggers[0]!r} is not defined as Ash defines it" in result.output


def test_sqlites_own_tables_must_be_as_sqlite_makes_them(settings, tmp_path):
    target = backup(settings, tmp_path)
    rewrite(target, "sqlite_sequence", "(name,seq)", "(name,seq CHECK (seq < 0))")
    result = restore(target)
    assert result.exit_code == 1
    assert "SQLite's own table 'sqlite_sequence' is not defined as SQLite defines it" in result.output


def test_an_object_named_like_sqlites_own_is_still_compared(settings, tmp_path):
    target = backup(settings, tmp_path)
    conn = apsw.Connection(str(target))
    # SQLite refuses new names that start with "sqlite_", but a LIKE 'sqlite_%' filter also
    # matched this one ('_' is any character), and a forged file can carry any name.
    conn.execute(PLANTED.replace("TRIGGER leak", "TRIGGER sqliteXleak"))
    conn.close()
    result = restore(target)
    assert result.exit_code == 1 and "'sqliteXleak'" in result.output


def test_a_table_posing_as_a_vector_tables_shadow_is_refused(settings, tmp_path):
    target = backup(settings, tmp_path)
    conn = connect(target)
    conn.execute("CREATE VIRTUAL TABLE vec_x USING vec0 (chunk_id INTEGER PRIMARY KEY, embedding float[2])")
    conn.execute("CREATE TABLE vec_x_stash (content TEXT)")
    conn.close()
    result = restore(target)
    assert result.exit_code == 1
    assert "an extra table 'vec_x_stash'" in result.output
    assert live_messages(settings) == 2


@pytest.mark.parametrize("level", range(1, len(STEPS)), ids=[s.name for s in STEPS[:-1]])
def test_a_genuine_backup_from_every_older_level_is_migrated_and_restored(settings, tmp_path, level):
    old = tmp_path / "old.db"
    conn = connect(old)
    migrate(conn, None, STEPS[:level])
    conn.close()
    result = restore(old)
    assert result.exit_code == 0, result.output
    assert STEPS[-1].name in result.output


def test_a_genuine_backup_of_todays_database_with_sqlites_own_tables_is_restored(settings, tmp_path):
    conn = connect(settings.database_path)
    conn.execute("ANALYZE")  # sqlite_stat1 (and sqlite_sequence, made by AUTOINCREMENT tables)
    conn.close()
    result = restore(backup(settings, tmp_path))
    assert result.exit_code == 0, result.output
    assert live_messages(settings) == 2
