"""The local model's thread team follows the machine's load (lib/memory/search/e5.py): every core
on a quiet machine, one when other work holds the cores, so an embedding does not wait at each
of its parallel steps for a thread the scheduler has put aside. No timing: the decision and
that it reaches the engine are checked."""

from __future__ import annotations

import pytest

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
    own = e5._own_running()
    assert own is None or own >= 1  # the caller itself is running


def test_only_other_processes_count_as_busy(monkeypatch):
    # Three threads running machine-wide, two of them this process's (the caller and, say, the
    # event loop sending the typing action): one other.
    reads = iter([3, 3])
    monkeypatch.setattr(e5, "_procs_running", lambda: next(reads))
    monkeypatch.setattr(e5, "_own_running", lambda: 2)
    assert e5._runnable_elsewhere() == 1


def test_a_thread_that_ran_for_a_moment_is_not_other_work(monkeypatch):
    # Two running at the first read, one (the caller) by the second: whatever it was, it is gone.
    reads = iter([2, 1])
    monkeypatch.setattr(e5, "_procs_running", lambda: next(reads))
    monkeypatch.setattr(e5, "_own_running", lambda: 1)
    assert e5._runnable_elsewhere() == 0


def test_the_threads_are_not_read_when_the_caller_runs_alone(monkeypatch):
    monkeypatch.setattr(e5, "_procs_running", lambda: 1)
    monkeypatch.setattr(e5, "_own_running", lambda: pytest.fail("read the threads for nothing"))
    assert e5._runnable_elsewhere() == 0


def test_the_machine_counts_alone_where_the_threads_cannot_be_read(monkeypatch):
    monkeypatch.setattr(e5, "_procs_running", lambda: 4)
    monkeypatch.setattr(e5, "_own_running", lambda: None)
    assert e5._runnable_elsewhere() == 3  # all but the caller, as before
