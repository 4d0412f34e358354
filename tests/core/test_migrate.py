"""Migrations: schema.sql is what they produce, failures roll back, re-runs are no-ops."""

import subprocess
import sys

import apsw
import pytest

import lib.migrations as migrate
from lib.db import connect
from lib.errors import MigrationError
from tests.support.paths import REPO

normalized_schema = migrate.schema_signature


def test_blank_database_migrated_equals_schema_sql(tmp_path):
    migrated = connect(tmp_path / "migrated.db")
    assert migrate.migrate(migrated) == [s.name for s in migrate.STEPS]
    reference = connect(tmp_path / "reference.db")
    reference.execute((REPO / "schema.sql").read_text())
    assert normalized_schema(migrated) == normalized_schema(reference)


def test_rerunning_is_a_no_op(tmp_path):
    conn = connect(tmp_path / "a.db")
    migrate.migrate(conn)
    before = normalized_schema(conn)
    assert migrate.migrate(conn) == []
    assert normalized_schema(conn) == before
    assert migrate.status(conn).current


def test_two_processes_migrating_at_once_apply_each_step_once(tmp_path, monkeypatch):
    """Two servers started on one database both find the newest step pending; the second to
    take the write lock finds it applied and goes on (it used to fail: "table already exists",
    and that server exited; seen with two `ash serve` started at once)."""
    first, second = connect(tmp_path / "a.db"), connect(tmp_path / "a.db")
    migrate.migrate(first, steps=migrate.STEPS[:-1])
    seen_by_second = migrate.status(second)
    assert seen_by_second.pending == [migrate.STEPS[-1].name]
    assert migrate.migrate(first) == [migrate.STEPS[-1].name]  # the first process wins the race
    monkeypatch.setattr(migrate, "status", lambda conn, steps=migrate.STEPS: seen_by_second)
    assert migrate.migrate(second) == []
    assert [r[0] for r in second.execute("SELECT name FROM schema_migrations")] == [s.name for s in migrate.STEPS]


def failing_step(conn: apsw.Connection) -> None:
    conn.execute("CREATE TABLE half_done (x INTEGER)")
    conn.execute(
        "INSERT INTO sessions (provider, chat_id, user_id, created_at, updated_at) VALUES ('t','1','1','x','x')"
    )
    conn.execute("THIS IS NOT SQL")


def test_a_failing_step_leaves_the_database_unchanged(tmp_path):
    conn = connect(tmp_path / "a.db")
    migrate.migrate(conn)
    conn.execute("INSERT INTO meta (key, value) VALUES ('keep', 'me')")
    before = normalized_schema(conn)
    steps = [*migrate.STEPS, migrate.Step("m999_broken", failing_step)]
    with pytest.raises(MigrationError, match="m999_broken failed and was rolled back"):
        migrate.migrate(conn, steps=steps)
    assert normalized_schema(conn) == before
    assert conn.execute("SELECT count(*) FROM sessions").fetchone()[0] == 0
    assert migrate.status(conn, steps).pending == ["m999_broken"]
    assert conn.execute("SELECT value FROM meta WHERE key = 'keep'").fetchone()[0] == "me"


def test_database_from_a_newer_version_is_refused(tmp_path):
    conn = connect(tmp_path / "a.db")
    migrate.migrate(conn)
    conn.execute("INSERT INTO schema_migrations VALUES ('m900_from_the_future', 'x')")
    with pytest.raises(MigrationError, match=r"newer version of Ash.*m900_from_the_future"):
        migrate.migrate(conn)


def test_backup_is_taken_before_migrating_a_database_with_data(tmp_path):
    path = tmp_path / "a.db"
    conn = connect(path)
    migrate.migrate(conn, path)
    assert not list(tmp_path.glob("*.bak")), "a blank database needs no backup"
    conn.execute("INSERT INTO meta (key, value) VALUES ('owner', 'me')")

    def add_column(c: apsw.Connection) -> None:
        c.execute("ALTER TABLE meta ADD COLUMN note TEXT")

    migrate.migrate(conn, path, steps=[*migrate.STEPS, migrate.Step("m900_note", add_column)])
    (backup,) = tmp_path.glob("a.db.pre-m900_note-*.bak")
    copy = connect(backup)
    assert copy.execute("SELECT value FROM meta WHERE key = 'owner'").fetchone()[0] == "me"
    assert "note" not in [row[1] for row in copy.execute("PRAGMA table_info(meta)")]


def test_rows_written_at_an_older_version_survive_a_later_step(tmp_path):
    path = tmp_path / "a.db"
    conn = connect(path)
    migrate.migrate(conn, path)
    conn.execute(
        "INSERT INTO sessions (provider, chat_id, user_id, created_at, updated_at) VALUES ('telegram','5','5','t','t')"
    )
    conn.execute(
        "INSERT INTO messages (session_id, owner_user_id, role, content, created_at) VALUES (1, '5', 'user', 'hi', 't')"
    )

    def add_language(c: apsw.Connection) -> None:
        c.execute("ALTER TABLE messages ADD COLUMN language TEXT NOT NULL DEFAULT 'und'")

    migrate.migrate(conn, path, steps=[*migrate.STEPS, migrate.Step("m900_language", add_language)])
    assert conn.execute("SELECT content, language FROM messages").fetchall() == [("hi", "und")]


def test_python_migrate_py_applies_migrations(tmp_path):
    path = tmp_path / "cli.db"
    result = subprocess.run([sys.executable, str(REPO / "migrate.py"), str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "applied m001_initial" in result.stdout
    again = subprocess.run([sys.executable, str(REPO / "migrate.py"), str(path)], capture_output=True, text=True)
    assert "up to date" in again.stdout


def test_fts5_and_sqlite_vec_are_available(conn):
    assert conn.execute("SELECT vec_version()").fetchone()[0].startswith("v")
    conn.execute(
        "INSERT INTO search_chunks (kind, ref_id, owner_user_id, content, content_hash, created_at) "
        "VALUES ('message', 1, 'u', 'the quick brown foxes', 'h', 't')"
    )
    hits = conn.execute("SELECT rowid FROM search_fts WHERE search_fts MATCH 'fox'").fetchall()
    assert hits == [(1,)]
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1


def test_every_connection_gets_the_best_practice_settings(tmp_path):
    from lib.db import BUSY_TIMEOUT_MS

    raw = apsw.Connection(str(tmp_path / "plain.db"))  # not through connect(): the hook applies anyway
    assert raw.pragma("journal_mode") == "wal"
    assert raw.pragma("foreign_keys") == 1
    assert raw.pragma("recursive_triggers") == 1
    assert raw.pragma("busy_timeout") == BUSY_TIMEOUT_MS
    with pytest.raises(apsw.SQLError, match="no such column"):
        raw.execute('SELECT "a string in double quotes"')  # DQS off: strings take single quotes
    raw.close()


def test_sqlite_log_messages_reach_the_ash_sqlite_logger(tmp_path, caplog):
    conn = connect(tmp_path / "log.db")
    with caplog.at_level("DEBUG", logger="ash.sqlite"), pytest.raises(apsw.SQLError):
        conn.execute("SELECT * FROM no_such_table")
    logged = [r for r in caplog.records if r.name == "ash.sqlite" and "no such table" in r.getMessage()]
    assert [r.levelname for r in logged] == ["DEBUG"]  # the caller got the exception: not an error twice
    conn.close()


def test_inbox_rows_stored_before_m009_still_run_one_chat_at_a_time_in_update_id_order(tmp_path):
    from lib.inbox import queue

    path = tmp_path / "a.db"
    conn = connect(path)
    migrate.migrate(conn, path, steps=[s for s in migrate.STEPS if s.name < "m009"])
    for update_id, chat in ((12, "c"), (10, "c"), (11, "c"), (20, "d")):
        conn.execute(
            "INSERT INTO inbox (bot_id, update_id, chat_key, kind, payload, received_at) VALUES (1, ?, ?, 'message', "
            "x'7b7d', 't')",
            (update_id, chat),
        )
    migrate.migrate(conn, path)

    def claimed() -> int | None:
        found = queue.claim(conn, 1, "w", 60)
        return found and found.update_id

    assert [claimed(), claimed(), claimed()] == [10, 20, None]
    queue.finish(conn, 1, 10, "w")
    assert claimed() == 11
    assert conn.execute("SELECT count(*) FROM inbox WHERE follows IS NOT NULL").fetchone()[0] == 0
