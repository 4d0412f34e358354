"""Knowledge entries, expiry, supersession links, forgetting and gc against a real SQLite file."""

from __future__ import annotations

import json
from contextlib import closing
from datetime import UTC, datetime

import pytest

from lib.inbox import queue as inbox
from lib.memory import forget, gc, knowledge, store
from lib.memory.search import index, vectors
from tests.support.memory_retrieval import fts_count, open_db
from tests.support.memory_surfaces import LOCAL_EMBEDDINGS, chunk_texts, make_settings, say


@pytest.fixture
def env(ash_home):
    settings = make_settings(ash_home)
    with closing(open_db(settings)) as conn:
        yield settings, conn


def test_parse_expiry_accepts_dates_times_and_spans():
    now = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    assert knowledge.parse_expiry("2026-05-01", now=now) == "2026-05-01T00:00:00.000Z"
    assert knowledge.parse_expiry("2026-05-01T18:00+02:00", now=now) == "2026-05-01T16:00:00.000Z"
    assert knowledge.parse_expiry("7d", now=now) == "2026-03-08T12:00:00.000Z"
    assert knowledge.parse_expiry("12h", now=now) == "2026-03-02T00:00:00.000Z"
    assert knowledge.parse_expiry(None) is None
    with pytest.raises(ValueError, match="ISO 8601"):
        knowledge.parse_expiry("next tuesday")


def test_add_validates_and_lists_only_the_owners_entries(env):
    settings, conn = env
    a = knowledge.add(conn, settings, "Alice's cat is called Miso", owner_user_id="1")
    knowledge.add(conn, settings, "Bob plays the cello", owner_user_id="2")
    g = knowledge.add(conn, settings, "The office wifi is ash-guest", owner_user_id=None, is_global=True)
    assert [e.id for e in knowledge.list_entries(conn, owner_user_id="1")] == [a]
    assert {e.id for e in knowledge.list_entries(conn, owner_user_id="1", include_global=True)} == {a, g}
    with pytest.raises(ValueError, match="owner"):
        knowledge.add(conn, settings, "orphan", owner_user_id=None)
    with pytest.raises(ValueError, match="confidence"):
        knowledge.add(conn, settings, "x", owner_user_id="1", confidence=1.5)
    with pytest.raises(ValueError, match="text"):
        knowledge.add(conn, settings, "   ", owner_user_id="1")


def test_expired_entries_are_inactive_and_gc_removes_them_with_their_index_rows(env):
    settings, conn = env
    keep = knowledge.add(conn, settings, "Dentist appointment on Friday", owner_user_id="1", expires_at="2999-01-01")
    gone = knowledge.add(
        conn, settings, "Parking in bay zanzibar this week", owner_user_id="1", expires_at="2020-01-01"
    )
    active = {e.id for e in knowledge.list_entries(conn, owner_user_id="1")}
    assert active == {keep}
    assert gone in {e.id for e in knowledge.list_entries(conn, owner_user_id="1", include_inactive=True)}
    assert fts_count(conn, "zanzibar") == 1

    counts = gc.collect(conn, settings)

    assert counts["expired"] == 1
    assert knowledge.get(conn, gone) is None and knowledge.get(conn, keep) is not None
    assert fts_count(conn, "zanzibar") == 0
    audit = conn.execute("SELECT action, detail FROM audit_log").fetchall()
    assert audit[-1][0] == "memory_gc" and "zanzibar" not in audit[-1][1]


def test_supersede_keeps_and_links_the_old_entry(env):
    settings, conn = env
    old = knowledge.add(conn, settings, "The user lives in Paris", owner_user_id="1", subject="home city")
    new = knowledge.add(conn, settings, "The user lives in Berlin", owner_user_id="1", subject="home city")
    knowledge.supersede(conn, old, new)
    old_entry, new_entry = knowledge.get(conn, old), knowledge.get(conn, new)
    assert old_entry.superseded_by == new and old_entry.superseded_at is not None
    assert new_entry.metadata["supersedes"] == [old]
    assert [e.id for e in knowledge.active_facts(conn, "1")] == [new]
    assert "Berlin" in knowledge.describe_user(conn, settings, "1")
    assert "Paris" not in knowledge.describe_user(conn, settings, "1")


def test_gc_max_entries_evicts_superseded_then_lowest_confidence_per_owner(ash_home):
    settings = make_settings(ash_home, '[embeddings]\nprovider = "none"\n[memory]\nmax_entries = 2\n')
    conn = open_db(settings)
    old = knowledge.add(conn, settings, "Lives in Paris", owner_user_id="1", confidence=1.0)
    new = knowledge.add(conn, settings, "Lives in Berlin", owner_user_id="1", confidence=0.9)
    knowledge.supersede(conn, old, new)
    weak = knowledge.add(conn, settings, "Maybe likes jazz", owner_user_id="1", confidence=0.5)
    strong = knowledge.add(conn, settings, "Is vegetarian", owner_user_id="1", confidence=0.95)
    other = knowledge.add(conn, settings, "Bob's fact", owner_user_id="2", confidence=0.1)

    counts = gc.collect(conn, settings)

    left = {e.id for e in knowledge.list_entries(conn, include_inactive=True)}
    assert left == {new, strong, other}, (old, weak)
    assert counts["evicted"] == 2
    conn.close()


def test_describe_user_shows_notes_and_facts_or_says_nothing_is_known(env):
    settings, conn = env
    assert "don't know anything" in knowledge.describe_user(conn, settings, "7")
    store.set_notes(conn, "7", "Prefers short answers.")
    knowledge.add(conn, settings, "Has a dog named Rex", owner_user_id="7", expires_at="2999-01-01")
    text = knowledge.describe_user(conn, settings, "7")
    assert "Prefers short answers." in text and "Has a dog named Rex" in text and "until 2999-01-01" in text


def test_forget_memory_deletes_entry_history_source_messages_and_their_index(env):
    settings, conn = env
    user_msg, answer = say(conn, settings, "1", "My locker code is quixotic 4812", "Got it, quixotic 4812.")
    later_user, _ = say(conn, settings, "1", "What is the weather like today?", "Sunny.")
    old = knowledge.add(conn, settings, "Locker code quixotic 1111", owner_user_id="1")
    new = knowledge.add(
        conn, settings, "Locker code quixotic 4812", owner_user_id="1", source="extraction", source_message_id=user_msg
    )
    knowledge.supersede(conn, old, new)
    assert fts_count(conn, "quixotic") >= 3

    result = forget.forget_memory(conn, settings, "1", new, "user:1")

    assert sorted(result["memory_ids"]) == sorted([old, new])
    assert result["message_ids"] == [user_msg, answer]
    assert knowledge.get(conn, new) is None and knowledge.get(conn, old) is None
    assert conn.execute("SELECT count(*) FROM messages WHERE id IN (?, ?)", (user_msg, answer)).fetchone()[0] == 0
    # The next turn survives, and its chunk no longer quotes the forgotten neighbour.
    assert conn.execute("SELECT count(*) FROM messages WHERE id = ?", (later_user,)).fetchone()[0] == 1
    assert fts_count(conn, "quixotic") == 0
    assert "quixotic" not in chunk_texts(conn)
    action, target, detail = conn.execute("SELECT action, target, detail FROM audit_log").fetchall()[-1]
    assert (action, target) == ("forget_memory", "1")
    assert "quixotic" not in detail and json.loads(detail)["memories"] == 2


def test_forget_memory_refuses_other_peoples_entries(env):
    settings, conn = env
    theirs = knowledge.add(conn, settings, "Bob's secret", owner_user_id="2")
    assert forget.forget_memory(conn, settings, "1", theirs, "user:1") is None
    assert knowledge.get(conn, theirs) is not None


def test_forget_user_removes_everything_including_vectors_and_cached_embeddings(ash_home):
    settings = make_settings(ash_home, LOCAL_EMBEDDINGS)
    conn = open_db(settings)
    say(conn, settings, "1", "I keep my spare key under the flamingo statue", "Noted, the flamingo statue.")
    say(conn, settings, "2", "Bob here: I like flamingo documentaries", "Nice.")
    # A group both are in: the person's group messages go, the other member's stay.
    say(conn, settings, "1", "Flamingo plans for the group trip", "Sounds fun.", chat_id="-500", chat_type="group")
    say(conn, settings, "2", "I will bring snacks for the trip", "Great.", chat_id="-500", chat_type="group")
    knowledge.add(conn, settings, "The user's spare key is under the flamingo statue", owner_user_id="1")
    store.set_notes(conn, "1", "Spare key: flamingo statue")
    mine = [r[0] for r in conn.execute("SELECT id FROM search_chunks WHERE owner_user_id = '1'")]
    assert mine and vectors.ids(conn) >= set(mine)
    stored_vector = conn.execute("SELECT vector FROM vec_chunks WHERE chunk_id = ?", (mine[0],)).fetchone()[0]
    cached_before = conn.execute("SELECT count(*) FROM embedding_cache").fetchone()[0]
    # The raw Telegram updates they sent hold their words too.
    for update_id, sender, text in ((10, 1, "my spare key is under the flamingo statue"), (11, 2, "Bob's snack list")):
        update = {"update_id": update_id, "message": {"from": {"id": sender}, "chat": {"id": sender}, "text": text}}
        inbox.store(conn, 1, update_id, str(sender), "message", json.dumps(update).encode())
    conn.execute("UPDATE inbox SET status = 'done'")

    counts = forget.forget_user(conn, settings, "1", "user:1", erasers={"telegram_updates": inbox.scrub_user})

    assert counts["messages"] == 4 and counts["memories"] == 1 and counts["profile"] == 1
    assert counts["telegram_updates"] == 1
    assert b"Bob's snack list" in inbox.get(conn, 1, 11)["payload"]
    assert inbox.get(conn, 1, 10) is not None, "the row stays so a repeat delivery is still a no-op"
    assert conn.execute("SELECT count(*) FROM messages WHERE owner_user_id = '1'").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM memories WHERE owner_user_id = '1'").fetchone()[0] == 0
    assert store.get_profile(conn, "1") is None
    assert conn.execute("SELECT count(*) FROM search_chunks WHERE owner_user_id = '1'").fetchone()[0] == 0
    # Every vector left belongs to a surviving (Bob's) chunk.
    assert vectors.ids(conn) == {r[0] for r in conn.execute("SELECT id FROM search_chunks")}
    assert "spare key" not in chunk_texts(conn) and "Flamingo plans" not in chunk_texts(conn)
    assert counts["cached_embeddings"] > 0
    assert conn.execute("SELECT count(*) FROM embedding_cache").fetchone()[0] < cached_before
    # Bob's rows survive, re-indexed without the forgotten neighbour.
    assert conn.execute("SELECT count(*) FROM messages WHERE owner_user_id = '2'").fetchone()[0] == 4
    assert fts_count(conn, "snacks") > 0
    # secure_delete + FTS merge + WAL checkpoint: the words and the vector bytes are gone from the file.
    conn.close()
    raw = settings.database_path.read_bytes()
    assert b"spare key" not in raw and b"flamingo statue" not in raw
    assert stored_vector not in raw
    conn = open_db(settings)
    action, detail = conn.execute("SELECT action, detail FROM audit_log").fetchall()[-1]
    assert action == "forget_user" and "flamingo" not in detail.lower()
    conn.close()


def test_prune_orphans_runs_in_gc(env):
    settings, conn = env
    memory_id = knowledge.add(conn, settings, "Orphan candidate", owner_user_id="1")
    conn.execute("DELETE FROM memories WHERE id = ?", (memory_id,))
    assert conn.execute("SELECT count(*) FROM search_chunks").fetchone()[0] == 1
    assert gc.collect(conn, settings)["orphans"] == 1
    assert conn.execute("SELECT count(*) FROM search_chunks").fetchone()[0] == 0
    assert index.prune_orphans(conn) == 0
