"""A restore to an earlier point keeps forgetting real: what was forgotten after the backup does not
come back, and the forget's audit record survives. `ash restore PATH` with no server running
(the restore in the CLI's own process), real SQLite files and migrations."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from lib.commands.cli import cli
from lib.conversation.commands import forget
from lib.db import connect, rows
from lib.inbox import queue
from lib.memory import knowledge
from lib.memory.forget import forget_memory
from tests.support.faults import free_port
from tests.support.memory_retrieval import open_db
from tests.support.memory_surfaces import chunk_texts, make_settings, say

OWNER, PERSON = "1001", "2002"
FORGETS_SQL = "SELECT created_at, actor, action, target FROM audit_log WHERE action LIKE 'forget_%' ORDER BY id"


@pytest.fixture
def settings(ash_home):
    # A port nobody listens on: `ash restore` finds no server and restores in its own process.
    extra = f'[server]\nport = {free_port()}\n[embeddings]\nprovider = "none"\n[memory]\nextraction_enabled = false\n'
    return make_settings(ash_home, extra)


def restore(path) -> str:
    result = CliRunner().invoke(cli, ["restore", str(path), "--yes"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_what_was_forgotten_after_a_backup_stays_forgotten_when_it_is_restored(settings, tmp_path):
    conn = open_db(settings)
    said, _ = say(conn, settings, PERSON, "My diagnosis came back: it is asthma", "I'm sorry; noted.")
    knowledge.add(conn, settings, "Has asthma", owner_user_id=PERSON, source_message_id=said)
    update = {"update_id": 77, "message": {"from": {"id": int(PERSON)}, "text": "it is asthma"}}
    queue.store(conn, settings.bot_id, 77, PERSON, "message", json.dumps(update).encode())
    conn.execute("UPDATE inbox SET status = 'done', done_at = received_at WHERE update_id = 77")
    kettle_said, _ = say(conn, settings, OWNER, "Order the blue kettle for the surprise", "Noted.")
    kettle = knowledge.add(
        conn, settings, "Plans a blue kettle surprise", owner_user_id=OWNER, source_message_id=kettle_said
    )
    say(conn, settings, OWNER, "I live in Lisbon")
    knowledge.add(conn, settings, "Lives in Lisbon", owner_user_id=OWNER)
    backup = tmp_path / "backup.db"
    assert CliRunner().invoke(cli, ["backup", str(backup)]).exit_code == 0

    # After the backup: the person presses "Yes, forget me" (/forget), and the owner deletes one
    # entry (DELETE /admin/memories/{id} and `ash memory forget` call forget_memory as here).
    say(conn, settings, OWNER, "Written after the backup")
    forget(conn, settings, PERSON, actor=f"telegram:{PERSON}")
    forget_memory(conn, settings, None, kettle, "admin")
    forgets = rows(conn, FORGETS_SQL)
    conn.close()
    assert [f["actor"] for f in forgets] == [f"telegram:{PERSON}", "admin"]

    output = restore(backup)
    assert "2 forget(s) applied again" in output

    conn = connect(settings.database_path)
    try:
        contents = " ".join(r["content"] for r in rows(conn, "SELECT content FROM messages"))
        assert "Written after the backup" not in contents, "the database is back at the backup's point"
        assert "I live in Lisbon" in contents
        assert "asthma" not in contents and "blue kettle" not in contents
        facts = [r["content"] for r in rows(conn, "SELECT content FROM memories")]
        assert facts == ["Lives in Lisbon"]
        assert "asthma" not in chunk_texts(conn) and "kettle" not in chunk_texts(conn)
        assert rows(conn, "SELECT 1 FROM user_profiles WHERE user_id = ?", (PERSON,)) == []
        payloads = b" ".join(r["payload"] for r in rows(conn, "SELECT payload FROM inbox"))
        assert b"asthma" not in payloads
        # The original records, as they were written, and one naming the restore for each.
        after = rows(conn, FORGETS_SQL)
        assert [f for f in after if f["actor"] != "restore"] == forgets
        assert sorted((f["action"], f["target"]) for f in after if f["actor"] == "restore") == [
            ("forget_memory", OWNER),
            ("forget_user", PERSON),
        ]
    finally:
        conn.close()

    # Restored once more from the same backup: the same two forgets applied again, not the records
    # of the first restore's re-application as forgets of their own (the log grows by two, no more).
    output = restore(backup)
    assert "2 forget(s) applied again" in output
    conn = connect(settings.database_path)
    try:
        again = rows(conn, FORGETS_SQL)
        assert [f for f in again if f["actor"] != "restore"] == forgets
        assert len(again) == len(after) + 2
        assert "asthma" not in " ".join(r["content"] for r in rows(conn, "SELECT content FROM messages"))
    finally:
        conn.close()
