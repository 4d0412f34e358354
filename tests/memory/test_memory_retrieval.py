"""Hybrid retrieval: what a user may see, expiry and supersession, budget cuts, degraded embeddings.

Real SQLite files, real migrations and the real local embedding model.
"""

from __future__ import annotations

import logging
from contextlib import closing
from datetime import UTC, datetime, timedelta

import pytest

from lib.memory.api import retrieve_context
from lib.memory.search import embeddings, fulltext, fusion, parallel, retrieval, words
from tests.support.memory_retrieval import add_knowledge, open_db, settings_with, turn

ALICE, BOB = "1001", "2002"


@pytest.fixture
def local(ash_home):
    settings = settings_with(ash_home)
    with closing(open_db(settings)) as conn:
        yield settings, conn


def _contents(results) -> list[str]:
    return [r.content for r in results]


def test_a_users_messages_never_reach_another_user(local):
    settings, conn = local
    turn(conn, settings, ALICE, "My locker code at the gym is 4471 and my dentist is Dr Okafor.")
    turn(conn, settings, BOB, "I play the cello on Tuesdays.")

    for query in ("locker code gym", "What is my dentist called?", "dentist Okafor 4471"):
        for mode in retrieval.MODES:
            bob_sees = retrieval.search_messages(conn, settings, user_id=BOB, query=query, mode=mode)
            assert all("4471" not in r.content for r in bob_sees), (query, mode)
        assert not any("4471" in r.content for r in retrieval.search_all(conn, settings, user_id=BOB, query=query))
        assert not any("4471" in r.content for r in retrieve_context(conn, settings, user_id=BOB, query=query))

    alice_sees = retrieval.search_messages(conn, settings, user_id=ALICE, query="dentist Okafor")
    assert "4471" in alice_sees[0].content
    assert alice_sees[0].source_type == "message"
    assert alice_sees[0].metadata["role"] == "user"
    assert "created_at" in alice_sees[0].metadata and "session_id" in alice_sees[0].metadata


def test_a_users_knowledge_is_private_and_global_entries_are_shared(local):
    settings, conn = local
    add_knowledge(conn, settings, "Alice is allergic to peanuts.", ALICE)
    add_knowledge(conn, settings, "The office wifi password is hunter2.", None, is_global=True)

    bob = _contents(retrieval.search_knowledge(conn, settings, user_id=BOB, query="peanut allergy wifi password"))
    assert bob == ["The office wifi password is hunter2."]
    alice = _contents(retrieval.search_knowledge(conn, settings, user_id=ALICE, query="peanut allergy wifi password"))
    assert set(alice) == {"Alice is allergic to peanuts.", "The office wifi password is hunter2."}
    # Semantic only (no shared words): the vector path respects ownership too.
    bob_vec = retrieval.search_knowledge(conn, settings, user_id=BOB, query="food intolerance", mode="vector")
    assert "Alice is allergic to peanuts." not in _contents(bob_vec)


def test_expired_and_superseded_knowledge_is_excluded(local):
    settings, conn = local
    past = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    future = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    add_knowledge(conn, settings, "Parking permit is valid in zone B.", ALICE, expires_at=past)
    live = add_knowledge(conn, settings, "Parking is free on the street this week.", ALICE, expires_at=future)
    old = add_knowledge(conn, settings, "Alice lives in Leeds.", ALICE)
    new = add_knowledge(conn, settings, "Alice lives in York.", ALICE)
    with conn:
        conn.execute("UPDATE memories SET superseded_by = ? WHERE id = ?", (new, old))

    for mode in retrieval.MODES:
        # Vector search always has nearest neighbours: what matters is what is never among them.
        parking = retrieval.search_knowledge(conn, settings, user_id=ALICE, query="parking permit zone", mode=mode)
        assert parking[0].id == live, mode
        assert "zone B" not in " ".join(_contents(parking)), mode
        lives = retrieval.search_knowledge(conn, settings, user_id=ALICE, query="where does Alice live", mode=mode)
        assert lives[0].id == new, mode
        assert old not in [r.id for r in lives], mode
    history = retrieval.search_knowledge(
        conn, settings, user_id=ALICE, query="where does Alice live", include_superseded=True
    )
    assert {old, new} <= {r.id for r in history}
    assert {r.metadata["superseded_by"] for r in history if r.id in (old, new)} == {None, new}


def test_semantic_match_without_shared_words(local):
    settings, conn = local
    turn(conn, settings, ALICE, "We adopted a small kitten, she sleeps all day.")
    turn(conn, settings, ALICE, "The quarterly tax return is due in April.")

    found = retrieval.search_messages(conn, settings, user_id=ALICE, query="my pet cat", mode="vector", limit=1)
    assert "kitten" in found[0].content
    assert retrieval.search_messages(conn, settings, user_id=ALICE, query="my pet cat", mode="fts") == []


def test_recency_breaks_ties_between_equally_relevant_entries(local):
    settings, conn = local
    older = add_knowledge(conn, settings, "Reminder: water the ficus.", ALICE)
    newer = add_knowledge(conn, settings, "Reminder: water the ficus.", ALICE)
    with conn:
        conn.execute("UPDATE memories SET created_at = '2020-01-01T00:00:00.000Z' WHERE id = ?", (older,))
    # Without the recency prior the tie would keep insertion order (older first).
    found = retrieval.search_knowledge(conn, settings, user_id=ALICE, query="ficus", limit=2)
    assert [r.id for r in found] == [newer, older]


def test_only_items_within_the_nudge_of_the_cut_have_their_time_read():
    # Scores far apart, a run of ties at the cut (the newer ones win it), and two items below.
    now = datetime.now(UTC)
    scores = {i: 1.0 - i / 10 for i in range(6)} | {10 + i: 0.3 for i in range(6)} | {20: 0.0, 21: -0.2}
    items = {ref: {"created_at": (now - timedelta(days=ref)).isoformat()} for ref in scores}
    everything = sorted(
        ((ref, s + fusion.RECENCY_WEIGHT * fusion.recency(items[ref]["created_at"], now)) for ref, s in scores.items()),
        key=lambda item: -item[1],
    )
    for limit in (1, 5, 8, 12, 40):
        read: list[int] = []
        logged = {ref: _Logged(ref, row, read) for ref, row in items.items()}
        top = fusion.ordered(scores, logged, limit)
        assert [ref for ref, _ in top] == [ref for ref, _ in everything[:limit]]
        # Nothing further below the cut than the nudge can reach has its time read.
        assert (20 in read, 21 in read) == ((False, False) if limit <= 12 else (True, True))
    assert [ref for ref, _ in fusion.ordered(scores, items, 8)][-2:] == [10, 11]  # the newest of the ties


class _Logged(dict):
    """A row that notes which items had their time read."""

    def __init__(self, ref: int, row: dict, read: list) -> None:
        super().__init__(row)
        self._ref, self._read = ref, read

    def __getitem__(self, key):
        if key == "created_at":
            self._read.append(self._ref)
        return super().__getitem__(key)


def test_retrieve_context_cuts_the_least_relevant_items_first(local):
    settings, conn = local
    turn(conn, settings, ALICE, "The boiler service engineer comes on Monday at nine. " * 3, "Ok")
    turn(conn, settings, ALICE, "Boiler pressure should stay near 1.5 bar.", "Ok")

    everything = retrieve_context(conn, settings, user_id=ALICE, query="boiler pressure bar", token_budget=10_000)
    assert everything[0].content == "Boiler pressure should stay near 1.5 bar."
    assert any("engineer" in r.content for r in everything)
    best_only = retrieve_context(conn, settings, user_id=ALICE, query="boiler pressure bar", token_budget=12)
    assert best_only[0].content == "Boiler pressure should stay near 1.5 bar."
    assert not any("engineer" in r.content for r in best_only)  # the long, less relevant one is cut
    assert sum(r.token_count for r in best_only) <= 12
    assert retrieve_context(conn, settings, user_id=ALICE, query="boiler", token_budget=0) == []


def test_embedding_service_down_still_returns_full_text_results(local, monkeypatch, caplog):
    settings, conn = local
    turn(conn, settings, ALICE, "The spare key is under the blue flowerpot.")

    def broken(self, texts, **kw):
        raise embeddings.EmbeddingError("connection refused")

    monkeypatch.setattr(embeddings.e5.E5Embedder, "embed", broken)
    monkeypatch.setattr(embeddings, "_down_until", {})
    with caplog.at_level(logging.WARNING, logger="ash.memory.embeddings"):
        found = retrieve_context(conn, settings, user_id=ALICE, query="where is the spare key?")
    assert "blue flowerpot" in found[0].content
    assert "embeddings unavailable" in caplog.text


def test_no_embeddings_configured_uses_full_text_only(ash_home):
    settings = settings_with(ash_home, '[embeddings]\nprovider = "none"\n')
    conn = open_db(settings)
    turn(conn, settings, ALICE, "Passport renewal appointment on the 3rd.")
    found = retrieval.search_all(conn, settings, user_id=ALICE, query="passport appointment")
    assert "Passport renewal" in found[0].content
    assert conn.execute("SELECT count(*) FROM sqlite_schema WHERE name = 'vec_chunks'").fetchone()[0] == 0
    conn.close()


def test_query_text_with_fts_syntax_is_searched_literally(local):
    settings, conn = local
    turn(conn, settings, ALICE, 'She said "NEAR" AND then OR maybe NOT* (really)')
    for query in ('"NEAR" AND', "NOT*", "(really) OR", "-", "***", ""):
        retrieval.search_messages(conn, settings, user_id=ALICE, query=query)  # must not raise
    assert words.fts_query("the and of") is None
    assert words.fts_query('Dr. "Okafor" OR dentist*') == '"dr" OR "okafor" OR "dentist"'


def test_hybrid_search_on_a_second_connection_ranks_as_one_connection_does(local, monkeypatch):
    settings, conn = local
    turn(conn, settings, ALICE, "We adopted a small kitten, she sleeps all day.")
    turn(conn, settings, ALICE, "The kitten's vet appointment is on Friday at noon.")
    turn(conn, settings, BOB, "My kitten is called Biscuit.")
    query = "when is the kitten going to the vet?"

    side_by_side = retrieval.search_messages(conn, settings, user_id=ALICE, query=query)
    assert parallel.side_path(conn) is not None  # this search did use a worker's connection
    monkeypatch.setattr(parallel, "PARALLEL", False)
    sequential = retrieval.search_messages(conn, settings, user_id=ALICE, query=query)
    assert [(r.id, round(r.score, 9)) for r in side_by_side] == [(r.id, round(r.score, 9)) for r in sequential]
    assert any("vet appointment" in r.content for r in side_by_side[:2])
    assert all("Biscuit" not in r.content for r in side_by_side)
    parallel.close_side_connections()


def test_hybrid_search_inside_a_transaction_sees_its_uncommitted_rows(local):
    settings, conn = local
    turn(conn, settings, ALICE, "Old note about the weather.")
    with conn:
        user_msg, _ = turn(conn, settings, ALICE, "The spare key is under the blue flowerpot.")
        assert parallel.side_path(conn) is None  # a second connection would not see this turn
        found = retrieval.search_messages(conn, settings, user_id=ALICE, query="where is the spare key")
        assert user_msg in [r.id for r in found[:2]]


def test_full_text_queries_match_first_even_with_planner_statistics(local):
    settings, conn = local
    for i in range(30):
        turn(conn, settings, ALICE, f"Note number {i} about the garden.")
    conn.execute("ANALYZE")  # what PRAGMA optimize does on its own once tables have grown
    params = {"q": '"garden"', "owner": ALICE, "n": 5, "now": "9999", "include_superseded": 0}
    for sql in (fulltext.FTS_MESSAGES_SQL, fulltext.FTS_KNOWLEDGE_SQL):
        plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params)]
        scans = [step for step in plan if step.startswith(("SCAN", "SEARCH"))]
        assert scans[0].startswith("SCAN search_fts"), plan
