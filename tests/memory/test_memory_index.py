"""The search index: chunks, FTS rows and vectors follow the canonical rows; model changes are detected."""

from __future__ import annotations

from lib.memory import store
from lib.memory.api import record_turn
from lib.memory.search import chunking, index, retrieval, vectors
from lib.memory.search.embeddings import LOCAL_MODEL
from tests.support.memory_retrieval import add_knowledge, fts_count, open_db, settings_with, turn, vector_rows

ALICE = "1001"


def test_record_turn_persists_and_indexes_both_messages(ash_home):
    settings = settings_with(ash_home)
    conn = open_db(settings)
    user_msg, answer = turn(conn, settings, ALICE, "Book the ferry to Arran", "Booked the 9:45 ferry to Arran.")
    indexed = {r[0] for r in conn.execute("SELECT ref_id FROM search_chunks WHERE kind = 'message'")}
    assert indexed == {user_msg, answer}
    assert vector_rows(conn) == 2
    # A chunk carries its neighbour's words (context), the result carries the message itself.
    chunk = conn.execute("SELECT content FROM search_chunks WHERE ref_id = ?", (answer,)).fetchone()[0]
    assert "Book the ferry" in chunk
    found = retrieval.search_messages(conn, settings, user_id=ALICE, query="9:45 ferry")
    assert found[0].content == "Booked the 9:45 ferry to Arran."
    conn.close()


def test_unindex_removes_fts_and_vector_rows(ash_home):
    settings = settings_with(ash_home)
    conn = open_db(settings)
    memory_id = add_knowledge(conn, settings, "The safe combination is 31-07-19 zanzibar.", ALICE)
    user_msg, _ = turn(conn, settings, ALICE, "Unrelated chat about rain.")
    assert fts_count(conn, "zanzibar") == 1
    before = vector_rows(conn)

    index.unindex(conn, "memory", memory_id)

    assert fts_count(conn, "zanzibar") == 0
    assert vector_rows(conn) == before - 1
    assert conn.execute("SELECT count(*) FROM search_chunks WHERE kind = 'memory'").fetchone()[0] == 0
    hits = retrieval.search_knowledge(conn, settings, user_id=ALICE, query="safe combination", mode="vector")
    assert hits == []
    assert retrieval.search_messages(conn, settings, user_id=ALICE, query="rain")[0].id == user_msg
    conn.close()


def test_prune_orphans_drops_index_rows_of_deleted_rows(ash_home):
    settings = settings_with(ash_home)
    conn = open_db(settings)
    user_msg, answer = turn(conn, settings, ALICE, "Call the plumber about the leak.", "Will do.")
    with conn:
        conn.execute("DELETE FROM messages WHERE id = ?", (user_msg,))
    assert index.prune_orphans(conn) == 1
    assert fts_count(conn, "plumber") == 1  # still in the answer's context ...
    assert {r[0] for r in conn.execute("SELECT ref_id FROM search_chunks")} == {answer}
    assert vector_rows(conn) == 1
    assert index.prune_orphans(conn) == 0
    conn.close()


def test_long_texts_are_chunked_and_found_by_a_late_passage(ash_home):
    settings = settings_with(ash_home)
    conn = open_db(settings)
    filler = " ".join(f"Sentence number {i} is about nothing in particular." for i in range(80))
    memory_id = add_knowledge(conn, settings, filler + " The wifi router lives in the hallway cupboard.", ALICE)
    chunks = conn.execute("SELECT count(*) FROM search_chunks WHERE ref_id = ?", (memory_id,)).fetchone()[0]
    assert chunks > 3
    assert all(len(c) <= chunking.MAX_CHUNK_CHARS for c in chunking.split_text(filler))
    found = retrieval.search_knowledge(conn, settings, user_id=ALICE, query="where is the wifi router?")
    assert [r.id for r in found] == [memory_id]
    assert found[0].content.endswith("hallway cupboard.")
    conn.close()


def test_model_change_is_detected_and_reindex_rebuilds(ash_home):
    settings = settings_with(ash_home)
    conn = open_db(settings)
    turn(conn, settings, ALICE, "Our cat is called Miso.", "Lovely name.")
    add_knowledge(conn, settings, "Alice prefers tea to coffee.", ALICE)
    status = index.index_status(conn, settings)
    assert status["stored_model"] == f"local:{LOCAL_MODEL}" and not status["needs_reindex"]
    assert status["vectors"] == status["chunks"] == 3

    # The operator switches to an OpenAI model of another dimension.
    other = settings_with(
        ash_home, '[embeddings]\nprovider = "openai"\nmodel = "text-embedding-3-small"\ndimensions = 512\n'
    )
    status = index.index_status(conn, other)
    assert status["needs_reindex"]
    assert "ash memory reindex" in status["message"]
    # Until then retrieval keeps working on full text (no mixing of vector spaces).
    assert (
        retrieval.search_messages(conn, other, user_id=ALICE, query="cat Miso")[0].content == "Our cat is called Miso."
    )

    # Back to the local model, with the table built for 512 dims: reindex recreates it.
    with conn:
        conn.execute("UPDATE meta SET value = 'openai:text-embedding-3-small' WHERE key = ?", (vectors.META_MODEL,))
    assert index.index_status(conn, settings)["needs_reindex"]
    seen = []
    assert index.reindex_all(conn, settings, progress=lambda done, total: seen.append((done, total))) == 3
    assert seen[-1] == (3, 3)
    status = index.index_status(conn, settings)
    assert not status["needs_reindex"] and status["vectors"] == status["chunks"] == 3
    found = retrieval.search_messages(conn, settings, user_id=ALICE, query="pet", mode="vector", limit=2)
    assert "Our cat is called Miso." in [r.content for r in found]
    conn.close()


def test_vectors_written_while_embeddings_were_down_are_backfilled(ash_home, monkeypatch):
    from lib.memory.search import embeddings

    settings = settings_with(ash_home)
    conn = open_db(settings)
    monkeypatch.setattr(embeddings, "_down_until", {})
    monkeypatch.setattr(embeddings.e5.E5Embedder, "embed", lambda self, texts, **kw: 1 / 0)
    session_msgs = record_turn(
        conn, settings, session_id=conn_session(conn), user_id=ALICE, user_text="Buy oat milk", answer_text="Ok"
    )
    assert vector_rows(conn) == 0 and fts_count(conn, "oat") == 2
    monkeypatch.undo()
    monkeypatch.setattr(embeddings, "_down_until", {})
    assert index.backfill_vectors(conn, settings) == 2
    assert vector_rows(conn) == 2
    found = retrieval.search_messages(conn, settings, user_id=ALICE, query="dairy-free drink", mode="vector")
    assert session_msgs[0] in [r.id for r in found]
    conn.close()


def conn_session(conn) -> int:
    from lib.memory import store

    return store.open_session(conn, "telegram", ALICE, ALICE, "private").id


def test_message_chunks_carry_the_day_in_the_configured_time_zone(ash_home):
    settings = settings_with(ash_home, 'timezone = "Pacific/Auckland"\n')
    conn = open_db(settings)
    session = store.open_session(conn, "telegram", ALICE, ALICE, "private")
    # 23:30 UTC on 18 August is already 19 August in Auckland.
    message = store.add_message(
        conn, session.id, ALICE, "user", "Ordered the walnut desk.", created_at="2023-08-18T23:30:00.000Z"
    )
    other = store.add_message(conn, session.id, ALICE, "user", "Ordered a lamp.", created_at="2023-09-02T10:00:00.000Z")
    index.index_messages(conn, settings, [message, other])
    chunk = conn.execute("SELECT content FROM search_chunks WHERE ref_id = ?", (message,)).fetchone()[0]
    assert chunk.startswith("[19 August 2023] ")
    found = retrieval.search_messages(conn, settings, user_id=ALICE, query="What did I order on 19 August?")
    assert found[0].id == message
    conn.close()
