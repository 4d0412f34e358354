"""A forget held for Undo (lib/memory/holds.py, lib/memory/undo.py): while the window is open the
entry, the messages it came from, their index rows, vectors and note line come back exactly;
once it closes the hold is deleted for real and Undo says so. Real SQLite file, the local
embedding model."""

from __future__ import annotations

from lib.memory import api as memory_api
from lib.memory import forget, holds, knowledge, store, undo
from tests.memory.test_memory_undo import snapshot
from tests.support.memory_retrieval import open_db
from tests.support.memory_surfaces import LOCAL_EMBEDDINGS, NO_EMBEDDINGS, make_settings

USER = "1001"
NOW = 1_800_000_000.0


def messages(conn) -> list:
    return conn.execute("SELECT * FROM messages ORDER BY id").fetchall()


def said_in_porto(conn, settings) -> int:
    """A turn saying where the user lives, the fact extracted from it, and its note line."""
    session = store.open_session(conn, "telegram", USER, USER, "private")
    memory_api.record_turn(
        conn, settings, session_id=session.id, user_id=USER, user_text="Breakfast was figs.", answer_text="Nice."
    )
    [first, _] = memory_api.record_turn(
        conn,
        settings,
        session_id=session.id,
        user_id=USER,
        user_text="I moved to Porto last spring.",
        answer_text="Porto is lovely.",
    )
    memory_api.record_turn(
        conn,
        settings,
        session_id=session.id,
        user_id=USER,
        user_text="The cello lesson went well.",
        answer_text="Great.",
    )
    entry = knowledge.add(
        conn, settings, "Lives in Porto", owner_user_id=USER, source="extraction", source_message_id=first
    )
    store.set_notes(conn, USER, "- Lives in Porto\n- Plays the cello")
    return entry


def test_undo_within_the_window_restores_the_exact_prior_state(ash_home):
    settings = make_settings(ash_home, LOCAL_EMBEDDINGS)
    conn = open_db(settings)
    entry = said_in_porto(conn, settings)
    before, said = snapshot(conn), messages(conn)
    assert before["fts"]["porto"] and before["vectors"]

    done = forget.forget_memory(conn, settings, USER, entry, "why:1001", hold_until_undo=NOW)
    gone = snapshot(conn)
    assert knowledge.get(conn, entry) is None and not gone["fts"]["porto"]
    assert "Porto" not in gone["notes"][0][0] and len(messages(conn)) == len(said) - 2

    back = undo.undo(conn, settings, done["audit_id"], actor="why:1001", now=NOW + holds.UNDO_SECONDS - 1)
    assert back.ok, back.message
    after = snapshot(conn)
    assert after["memories"] == before["memories"] and messages(conn) == said
    assert after["chunks"] == before["chunks"] and after["fts"] == before["fts"]
    assert after["vectors"] == before["vectors"]
    assert sorted(after["notes"][0][0].splitlines()) == sorted(before["notes"][0][0].splitlines())
    assert conn.execute("SELECT count(*) FROM forget_holds").fetchone()[0] == 0
    again = undo.undo(conn, settings, done["audit_id"], actor="why:1001", now=NOW)
    assert not again.ok and "undone already" in again.message


def test_after_the_window_the_hold_is_deleted_for_real_and_undo_says_so(ash_home):
    settings = make_settings(ash_home, NO_EMBEDDINGS)
    conn = open_db(settings)
    entry = said_in_porto(conn, settings)
    done = forget.forget_memory(conn, settings, USER, entry, "why:1001", hold_until_undo=NOW)
    late = NOW + holds.UNDO_SECONDS
    refused = undo.undo(conn, settings, done["audit_id"], actor="why:1001", now=late)
    assert not refused.ok and "no longer exists" in refused.message
    assert holds.purge_expired(conn, settings, late - 1) == 0  # not before its time
    assert holds.purge_expired(conn, settings, late) == 1
    conn.close()
    raw = settings.database_path.read_bytes()
    assert b"I moved to Porto" not in raw and b"Lives in Porto" not in raw


def test_a_forget_without_a_hold_and_a_message_whose_id_was_taken(ash_home):
    settings = make_settings(ash_home, NO_EMBEDDINGS)
    conn = open_db(settings)
    entry = said_in_porto(conn, settings)
    # The `forget` tool, the CLI and the admin API hold nothing: undo cannot bring it back.
    plain = forget.forget_memory(conn, settings, USER, entry, "cli")
    assert not undo.undo(conn, settings, plain["audit_id"], actor="cli", now=NOW).ok

    # A past message forgotten from /why, and the newest id taken by a message since.
    newest = conn.execute("SELECT max(id) FROM messages").fetchone()[0]
    done = forget.forget_message(conn, settings, USER, newest - 1, "why:1001", hold_until_undo=NOW)
    session = conn.execute("SELECT id FROM sessions").fetchone()[0]
    memory_api.record_turn(conn, settings, session_id=session, user_id=USER, user_text="New words.", answer_text="Ok.")
    assert undo.undo(conn, settings, done["audit_id"], actor="why:1001", now=NOW + 1).ok
    contents = [r[0] for r in conn.execute("SELECT content FROM messages ORDER BY id")]
    assert "The cello lesson went well." in contents and "New words." in contents
    hits = conn.execute("SELECT count(*) FROM search_fts WHERE search_fts MATCH 'cello'").fetchone()[0]
    assert hits > 0


async def test_the_memory_service_deletes_holds_whose_window_closed(ash_home):
    from lib.db import Database
    from lib.memory.service import MemoryService

    # The daily pass runs too (its first time): its duplicate checks only, no model.
    settings = make_settings(ash_home, NO_EMBEDDINGS + "[memory]\nconsolidate_daily_tokens = 0\n")
    conn = open_db(settings)
    entry = said_in_porto(conn, settings)
    forget.forget_memory(conn, settings, USER, entry, "why:1001", hold_until_undo=NOW)
    now = [NOW + 60]

    async def no_model(**_) -> str:
        raise AssertionError("no model call")

    service = MemoryService(Database(settings.database_path), settings, complete=no_model, clock=lambda: now[0])
    await service.daily_if_due()
    assert conn.execute("SELECT count(*) FROM forget_holds").fetchone()[0] == 1
    now[0] = NOW + holds.UNDO_SECONDS
    service._daily_check = 0  # the next minute's check, without waiting a minute
    await service.daily_if_due()
    assert conn.execute("SELECT count(*) FROM forget_holds").fetchone()[0] == 0
