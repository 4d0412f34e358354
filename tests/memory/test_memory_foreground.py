"""Background embedding steps aside while a question is being answered (issue 33: on two busy
cores a hybrid query took 6 to 8 times its quiet time, beside the embedding of new turns)."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable

import numpy as np
import pytest

from lib.memory import store
from lib.memory.api import record_turn
from lib.memory.search import e5, foreground, fusion, index, retrieval
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


def _noting_each_embedding(monkeypatch, note: Callable[[list[str]], object]) -> list:
    """What `note` says of each call to the indexer's embedding, which still embeds."""
    noted: list = []
    real = index.embed_texts

    def embed_texts(conn, settings, texts, **kw):
        noted.append(note(texts))
        return real(conn, settings, texts, **kw)

    monkeypatch.setattr(index, "embed_texts", embed_texts)
    return noted


def test_background_embedding_waits_while_a_question_is_answered(ash_home, monkeypatch):
    settings = settings_with(ash_home)
    conn = open_db(settings)
    _turns_without_vectors(conn, settings, 3)
    embedded = _noting_each_embedding(monkeypatch, len)
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


class _HeldModel:
    """A stand-in for the local model whose passages stay in the engine until released."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.priorities: dict[str, list[int]] = {"passage": [], "query": [], "started by passage": []}

    @staticmethod
    def _priority() -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    def passage(self, batch):
        self.priorities["passage"].append(self._priority())
        # A thread started here stands for the engine's OpenMP team, started by the calling thread.
        team = threading.Thread(target=lambda: self.priorities["started by passage"].append(self._priority()))
        team.start()
        team.join()
        self.entered.set()
        self.release.wait(CEILING)
        return np.ones((len(batch), e5.DIMENSIONS), dtype=np.float32)

    def query(self, batch):
        self.priorities["query"].append(self._priority())
        return np.ones((len(batch), e5.DIMENSIONS), dtype=np.float32)


def test_a_question_is_embedded_while_a_background_slice_is_still_in_the_engine(monkeypatch):
    model = _HeldModel()
    monkeypatch.setattr(e5, "_load", lambda: model)
    monkeypatch.setattr(e5, "_omp_set_num_threads", lambda: None)

    def background_slice() -> None:
        with foreground.in_background():
            e5.raw_embed(["a long answer, being indexed"])

    indexing = threading.Thread(target=background_slice)
    indexing.start()
    assert model.entered.wait(CEILING), "the background slice never reached the engine"
    asked: list[np.ndarray] = []
    asking = threading.Thread(target=lambda: asked.append(e5.raw_embed(["what milk do I buy?"], query=True)))
    asking.start()
    asking.join(CEILING)

    try:
        assert asked, "the question's embedding waited for the background slice"
        assert not model.release.is_set() and indexing.is_alive()
    finally:
        model.release.set()
        indexing.join(CEILING)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a nice value per thread is Linux's")
def test_background_embedding_runs_at_a_low_priority_and_its_team_too(monkeypatch):
    model = _HeldModel()
    model.release.set()
    monkeypatch.setattr(e5, "_load", lambda: model)
    monkeypatch.setattr(e5, "_omp_set_num_threads", lambda: None)
    ours = os.getpriority(os.PRIO_PROCESS, 0)

    e5.raw_embed(["a document section the person is waiting for"])
    e5.raw_embed(["a question"], query=True)
    with foreground.in_background():
        assert foreground.background_now()
        e5.raw_embed(["an answer indexed afterwards"])
    assert not foreground.background_now()

    assert model.priorities["query"] == [ours]
    assert model.priorities["passage"] == [ours, max(ours, e5.BACKGROUND_NICE)]
    assert model.priorities["started by passage"] == [ours, max(ours, e5.BACKGROUND_NICE)]


def test_the_background_pass_embeds_as_background_work(ash_home, monkeypatch):
    settings = settings_with(ash_home)
    conn = open_db(settings)
    _turns_without_vectors(conn, settings, 1)
    marked = _noting_each_embedding(monkeypatch, lambda texts: foreground.background_now())

    assert index.backfill_vectors(conn, settings) == 2
    index.index_messages(conn, settings, [1])  # a turn stored with its vectors at once

    assert marked[0] is True and marked[1:] == [False] * (len(marked) - 1) and len(marked) >= 2
    marked.clear()
    index.reindex_all(conn, settings)  # `ash memory reindex`, beside a running server
    assert marked and all(marked)
    conn.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a nice value per thread is Linux's")
def test_lowering_the_priority_never_raises_it():
    seen: list[int] = []

    def already_low() -> None:
        here = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, here, e5.BACKGROUND_NICE + 5)  # as under `nice -n 15`
        assert e5.lower_priority()
        seen.append(os.getpriority(os.PRIO_PROCESS, here))

    thread = threading.Thread(target=already_low)
    thread.start()
    thread.join(CEILING)

    assert seen == [e5.BACKGROUND_NICE + 5]
