"""The local model's thread team follows the machine's load (lib/memory/search/e5.py): every core
on a quiet machine, one when other work holds the cores, so an embedding does not wait at each
of its parallel steps for a thread the scheduler has put aside. No timing: the decision and
that it reaches the engine are checked."""

from __future__ import annotations

from lib.memory.search import e5


def test_the_team_is_every_core_when_quiet_and_one_when_busy():
    assert e5.threads_for_now(cores=2, busy=0) == 2
    assert e5.threads_for_now(cores=2, busy=1) == 1
    assert e5.threads_for_now(cores=2, busy=6) == 1
    assert e5.threads_for_now(cores=16, busy=0) == e5.MAX_THREADS
    assert e5.threads_for_now(cores=8, busy=5) == 3


def test_each_embedding_sets_the_team_for_the_load_of_the_moment(monkeypatch):
    asked: list[int] = []
    monkeypatch.setattr(e5, "_omp_set_num_threads", lambda: asked.append)
    monkeypatch.setattr(e5, "_runnable_elsewhere", lambda: 3)
    monkeypatch.setattr(e5.os, "cpu_count", lambda: 2)

    assert e5._encode_now(lambda batch: len(batch), ["a", "b"]) == 2
    monkeypatch.setattr(e5, "_runnable_elsewhere", lambda: 0)
    e5._encode_now(lambda batch: len(batch), ["a"])

    assert asked == [1, 2]


def test_the_load_is_read_from_the_kernel():
    busy = e5._runnable_elsewhere()
    assert busy is None or busy >= 0
