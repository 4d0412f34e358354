"""Moving a memory from all-MiniLM-L6-v2 (the model before) to multilingual-e5-small (the
default): the old vectors are never mixed with the new, `ash memory reindex` migrates them with
a progress bar; e5 vectors are taken around the model's centre, and the KNN rescores a wide
coarse pass. Real SQLite file, real migrations, both real models."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
from click.testing import CliRunner

from lib.commands.cli import cli
from lib.commands.doctor_checks import check_memory_index
from lib.memory.search import e5, index, retrieval, vectors
from tests.support.memory_retrieval import open_db, settings_with, turn

REPO = Path(__file__).resolve().parents[2]
ALICE = "1001"
MINILM = '[embeddings]\nprovider = "local"\nmodel = "all-MiniLM-L6-v2"\n[memory]\nextraction_enabled = false\n'
DEFAULT = "[memory]\nextraction_enabled = false\n"
TURNS = [
    ("I adopted a greyhound called Pepper last month.", "Lovely, greyhounds are gentle."),
    ("My sister lives in Porto and teaches chemistry.", "Nice city."),
    ("The boiler makes a banging noise every morning.", "That may be air in the pipes."),
]


def test_reindex_moves_a_minilm_memory_to_e5(ash_home):
    old = settings_with(ash_home, MINILM)
    conn = open_db(old)
    for said, answer in TURNS:
        turn(conn, old, ALICE, said, answer)
    assert index.index_status(conn, old)["stored_model"] == "local:all-MiniLM-L6-v2"

    new = settings_with(ash_home, DEFAULT)
    status = index.index_status(conn, new)
    assert status["needs_reindex"] and "ash memory reindex" in status["message"]
    # Until the reindex, answers come from full text, never from MiniLM vectors read as e5 ones.
    assert retrieval.search_messages(conn, new, user_id=ALICE, query="dog", mode="vector") == []
    conn.close()
    told = check_memory_index(new)
    assert told.status == "warn" and "all-MiniLM-L6-v2" in told.detail and "ash memory reindex" in told.hint

    result = CliRunner().invoke(cli, ["memory", "reindex"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "reindexing" in result.output and "indexed 6" in result.output

    conn = open_db(new)
    status = index.index_status(conn, new)
    assert status["stored_model"] == "local:multilingual-e5-small" and not status["needs_reindex"]
    assert status["vectors"] == status["chunks"] == 6
    assert check_memory_index(new).status == "ok"
    found = retrieval.search_messages(conn, new, user_id=ALICE, query="What kind of dog do I have?", mode="vector")
    assert {r.content for r in found[:2]} == set(TURNS[0])  # "dog" finds the greyhound turn and its answer
    conn.close()


def test_e5_vectors_are_taken_around_its_centre():
    """Raw e5 vectors put any two texts at cosine 0.75 or more (nearly the same sign bits, no
    fixed floor can tell topics apart); centred, unrelated texts score low and related ones high,
    and the sign bits differ between texts."""
    texts = ["The cat sat on the mat.", "A kitten rested on the rug.", "Quarterly tax filing deadline."]
    raw = e5.raw_embed(texts)
    assert float(raw[0] @ raw[2]) > 0.75
    centred = e5.E5Embedder().embed(texts)
    assert np.allclose(np.linalg.norm(centred, axis=1), 1.0, atol=1e-5)
    assert float(centred[0] @ centred[1]) > 0.5 > 0.35 > float(centred[0] @ centred[2])
    assert np.mean((centred[0] > 0) != (centred[2] > 0)) > 2 * np.mean((raw[0] > 0) != (raw[2] > 0))


def test_knn_rescores_a_wide_coarse_pass_exactly(ash_home):
    """Up to COARSE_CANDIDATES vectors, the KNN equals an exact cosine ranking, however few it returns."""
    settings = settings_with(ash_home, DEFAULT)
    conn = open_db(settings)
    for said, answer in TURNS:
        turn(conn, settings, ALICE, said, answer)
    query = e5.E5Embedder().embed(["a pet dog"], query=True)[0]
    stored = {
        chunk_id: np.frombuffer(vector, dtype=np.float32)
        for chunk_id, vector in conn.execute("SELECT chunk_id, vector FROM vec_chunks")
    }
    exact = sorted(stored, key=lambda c: -float(stored[c] @ query))[:2]
    found = vectors.knn(conn, query, owner=ALICE, kind="message", candidates=2)
    assert [chunk_id for chunk_id, _ in found] == exact
    conn.close()


def test_e5_embeds_in_a_forked_child_after_the_parent_used_it():
    """A server that forks workers after embedding once must not leave the child waiting on the
    parent's embedding thread (which a fork does not copy)."""
    script = """
import os, signal
from lib.memory.search import e5
e5.E5Embedder().embed(["in the parent"])
child = os.fork()
if child == 0:
    signal.alarm(30)
    os._exit(0 if e5.E5Embedder().embed(["in the child"], query=True).shape == (1, 384) else 1)
_, status = os.waitpid(child, 0)
print(os.waitstatus_to_exitcode(status))
"""
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", script], capture_output=True, text=True, timeout=60, cwd=REPO
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0"]


def test_a_question_is_embedded_between_a_background_batchs_texts():
    """Passages someone waits for (a document sent with a question) share the question's
    embedding thread: a question must not wait behind all of them (the engine takes a few texts
    per call). Background passes have a thread of their own (test_memory_foreground.py)."""
    import threading
    import time

    long_texts = [
        f"[8 May 2023] Sam: a long stored turn number {i} " + "about the garden and the boiler " * 20 for i in range(24)
    ]
    background = threading.Thread(target=e5.E5Embedder().embed, args=(long_texts,))
    e5.E5Embedder().embed(["load the model first"])
    background.start()
    time.sleep(0.3)  # the background batch is under way (its 24 texts take about a second)
    e5.E5Embedder().embed(["What did Sam say about the garden?"], query=True)
    assert background.is_alive(), "the question waited for the whole background batch"
    background.join()
