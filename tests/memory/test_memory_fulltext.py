"""The full-text half of a message search (lib/memory/search/fulltext.py): the two-step query
against the one-step query it stands for, and messages, not chunks, counted to the limit. Real
SQLite files and migrations, embeddings off (full text alone)."""

from __future__ import annotations

from contextlib import closing

from lib.db import rows
from lib.memory.search import fulltext, retrieval
from tests.support.memory_retrieval import open_db, settings_with, turn

ALICE, BOB = "1001", "2002"


def test_a_message_search_asks_the_whole_index_when_the_best_matches_are_someone_elses(ash_home, monkeypatch):
    """The two-step full-text query gives the one-step query's answer: from the best matches of
    everyone when they hold enough of the asker's, from the whole index when they do not."""
    settings = settings_with(ash_home, '[embeddings]\nprovider = "none"\n')
    monkeypatch.setattr(fulltext, "PREFIX", 8)
    with closing(open_db(settings)) as conn:
        for n in range(12):
            turn(conn, settings, BOB, f"Garden, garden, garden {n}.")
        for n in range(6):
            turn(conn, settings, ALICE, f"Number {n}: my garden had tomatoes this year, and the shed leaked.")
        for user in (ALICE, BOB):
            one_step = rows(conn, fulltext.FTS_MESSAGES_SQL, {"q": '"garden"', "owner": user, "n": 4})
            assert len(one_step) == 4
            assert fulltext.message_matches(conn, '"garden"', user, 4) == one_step
        found = retrieval.search_messages(conn, settings, user_id=ALICE, query="garden")
        assert any("tomatoes" in r.content for r in found)


def test_a_long_answer_counts_once_among_the_full_text_candidates(db, monkeypatch):
    """A long answer is several chunks that all match; the candidates are the best messages, so
    the short turn that says the fact is still among them (by chunks, it fell off the list)."""
    settings, conn = db
    monkeypatch.setattr(retrieval, "FTS_CANDIDATES", 3)
    steps = " ".join(f"Step {n}: clean the suede sneakers with the soft brush, then air them." for n in range(60))
    fact, _ = turn(conn, settings, ALICE, "I bought white leather sneakers at the Main Street store.", "Nice.")
    for day in ("Monday", "Tuesday", "Wednesday"):
        turn(conn, settings, ALICE, f"The weather on {day} was grey and windy.", "Sorry to hear.")
    turn(conn, settings, ALICE, "How do I clean them?", f"Here is how to clean sneakers. {steps}")
    answer_chunks = conn.execute("SELECT count(*) FROM search_chunks GROUP BY ref_id ORDER BY 1 DESC").fetchone()[0]
    assert answer_chunks > 3  # the answer alone would fill the list of chunks

    found = [r["ref_id"] for r in fulltext.message_matches(conn, '"sneakers"', ALICE, 3)]
    assert len(set(found)) == 3 and fact in found
    assert fact in [r.id for r in retrieval.search_messages(conn, settings, user_id=ALICE, query="sneakers")]
