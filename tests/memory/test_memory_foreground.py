"""Background embedding steps aside while a question is being answered (issue 33: on two busy
cores a hybrid query took 6 to 8 times its quiet time, beside the embedding of new turns)."""

from __future__ import annotations

import threading

from lib.memory import store
from lib.memory.api import record_turn
from lib.memory.search import foreground, fusion, index, retrieval
from tests.support.memory_retrieval import open_db, settings_with, vector_rows

ALICE = "1001"
CEILING = 60.0  # generous: the waits below end on an event, never on time


def _turns_without_vectors(conn, settings, count: int) -> None:
    """Turns stored the way the server stores them: full text now, vectors in the background."""
    session = store.open_session(conn, "telegram", ALICE, ALICE, "private")
    for n in range(count):
        record_turn(
            conn,
            settings,
            session_id=session.id,
            user_id=ALICE,
            user_text=f"Note {n}: oat milk",
            answer_text="Ok",
            embed=False,
        )


def test_background_embedding_waits_while_a_question_is_answered(ash_home, monkeypatch):
    settings = settings_with(ash_home)
    conn = open_db(settings)
    _turns_without_vectors(conn, settings, 3)
    embedded: list[int] = []
    real = index.embed_texts
    monkeypatch.setattr(
        index, "embed_texts", lambda c, s, texts, **kw: embedded.append(len(texts)) or real(c, s, texts, **kw)
    )
    # The moment the background pass starts waiting for the question, as an event.
    waiting = threading.Event()
    idle_wait = foreground._idle.wait
    monkeypatch.setattr(foreground._idle, "wait", lambda timeout=None: waiting.set() or idle_wait(timeout))
    done: list[int] = []
    worker = threading.Thread(
        target=lambda: done.append(index.backfill_vectors(open_db(settings), settings, yield_ceiling=CEILING))
    )

    with foreground.answering():
        worker.start()
        assert waiting.wait(CEILING), "the background pass never stepped aside"
        assert embedded == [] and vector_rows(conn) == 0
    worker.join(CEILING)

    assert done == [6] and vector_rows(conn) == 6
    # In slices, so a question that comes meanwhile waits for one slice at most.
    assert max(embedded) <= foreground.SLICE
    conn.close()


def test_a_search_counts_as_a_question_being_answered(ash_home, monkeypatch):
    settings = settings_with(ash_home)
    conn = open_db(settings)
    _turns_without_vectors(conn, settings, 1)
    seen: list[int] = []
    real = fusion.results
    monkeypatch.setattr(fusion, "results", lambda *a, **kw: seen.append(foreground.answering_now()) or real(*a, **kw))

    assert [r.content for r in retrieval.search_messages(conn, settings, user_id=ALICE, query="oat milk", mode="fts")]
    retrieval.search_all(conn, settings, user_id=ALICE, query="oat milk")

    assert seen and min(seen) >= 1
    assert foreground.answering_now() == 0 and foreground.step_aside(0)
    conn.close()


def test_constant_questions_do_not_starve_indexing(ash_home):
    settings = settings_with(ash_home)
    conn = open_db(settings)
    _turns_without_vectors(conn, settings, 2)

    with foreground.answering():  # a question that never ends: each wait stops at its ceiling
        assert index.backfill_vectors(conn, settings, yield_ceiling=0.01) == 4

    assert vector_rows(conn) == 4
    conn.close()
