"""Recording turns: a resumed update is not stored twice, and vectors follow the turn off the reply path."""

from __future__ import annotations

import pytest

from lib.memory import store
from lib.memory.api import record_turn
from lib.memory.search import index, retrieval, vectors
from lib.memory.service import MemoryService
from tests.support.memory_retrieval import open_db, settings_with


@pytest.fixture
def env(ash_home):
    settings = settings_with(ash_home)  # the default: local embeddings
    conn = open_db(settings)
    yield settings, conn
    conn.close()


def exchange(conn, settings, text, answer, *, update_id=None, embed=True):
    session = store.open_session(conn, "telegram", "7", "7", "private")
    return record_turn(
        conn,
        settings,
        session_id=session.id,
        user_id="7",
        user_text=text,
        answer_text=answer,
        update_id=update_id,
        embed=embed,
    )


def test_a_resumed_update_replaces_its_answer_instead_of_storing_the_exchange_twice(env):
    settings, conn = env
    first = exchange(conn, settings, "what is the capital of peru", "Lim…", update_id=41)
    again = exchange(conn, settings, "what is the capital of peru", "Lima.", update_id=41)
    assert again == first
    stored = conn.execute("SELECT role, content FROM messages ORDER BY id").fetchall()
    assert stored == [("user", "what is the capital of peru"), ("assistant", "Lima.")]
    # The index follows the replaced answer.
    assert conn.execute("SELECT count(*) FROM search_chunks WHERE content LIKE '%Lim…%'").fetchone()[0] == 0


def test_different_updates_are_separate_exchanges(env):
    settings, conn = env
    exchange(conn, settings, "hello there", "Hi!", update_id=1)
    exchange(conn, settings, "hello there", "Hi again!", update_id=2)
    assert conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 4


def test_turns_stored_without_vectors_are_found_by_words_then_embedded_by_backfill(env):
    settings, conn = env
    exchange(conn, settings, "My bicycle is a green Gazelle from 1998", "Nice bike.", embed=False)
    waiting = conn.execute("SELECT count(*) FROM search_chunks WHERE embedded = 0").fetchone()[0]
    assert waiting == 2 and vectors.count(conn) == 0
    found = retrieval.search_messages(conn, settings, user_id="7", query="bicycle Gazelle")
    assert found and "Gazelle" in found[0].content
    question = "what kind of bike do I ride"
    assert retrieval.search_messages(conn, settings, user_id="7", query=question, mode="vector") == []

    assert index.backfill_vectors(conn, settings) == 2
    assert conn.execute("SELECT count(*) FROM search_chunks WHERE embedded = 0").fetchone()[0] == 0
    assert vectors.count(conn) == 2
    assert index.backfill_vectors(conn, settings) == 0
    semantic = retrieval.search_messages(conn, settings, user_id="7", query=question, mode="vector")
    assert {r.id for r in semantic} == {1, 2}


async def test_memory_service_embeds_pending_turns(env):
    settings, conn = env
    exchange(conn, settings, "I grew up in Tromsø, far in the north", "Cold winters!", embed=False)
    from lib.db import Database

    async def no_model(**_):
        raise AssertionError("embedding needs no model")

    service = MemoryService(Database(settings.database_path), settings, complete=no_model)
    assert await service.embed_pending() == 2
    assert conn.execute("SELECT count(*) FROM search_chunks WHERE embedded = 0").fetchone()[0] == 0
