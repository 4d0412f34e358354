"""Retrieval latency with 100k stored messages of the asking user (query embedding included).

    .venv/bin/python bench/retrieval_100k.py [--messages 100000] [--queries 300] [--busy]

`--busy` times the same searches with a busy loop per core running beside them (other work on
the machine: a sandbox command, another process) and Ash's own indexing going on at the same
time (long answers, each new, stored and embedded in a thread of this process, as the memory
service does: full text at once, vectors in slices that step aside while a search runs, on the
local model's low-priority background thread; `--no-step-aside` embeds without waiting, to
compare).

Builds a temporary database holding N messages of one user (plus 10k of four other users)
and times the production retrieval path: `search_messages` (hybrid: FTS5 BM25 + binary-vec0
coarse pass with float rescoring + fusion), the local model embedding the query each time
(nothing cached), and `retrieve_context` (messages and knowledge within the token budget).

How the index is filled: messages are random sentences over a Zipf-distributed vocabulary,
written as canonical rows and search chunks (FTS5 by trigger). Embedding 100k contextual chunks
with the local model would take about half an hour here, so each chunk's vector is a real
embedding (the configured local model) of one of 2,000 sentences plus noise (same distribution shape, same vec0
layout); LoCoMo (bench/locomo.py) measures the real per-turn indexing cost.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import click  # noqa: E402
import numpy as np  # noqa: E402

import lib.migrations as migrate  # noqa: E402
from lib.config import load_settings  # noqa: E402
from lib.db import connect, iso  # noqa: E402
from lib.memory.api import retrieve_context  # noqa: E402
from lib.memory.search import vectors  # noqa: E402
from lib.memory.search.embeddings import content_hash, get_embedder, model_key  # noqa: E402
from lib.memory.search.parallel import close_side_connections  # noqa: E402
from lib.memory.search.retrieval import search_messages  # noqa: E402

USER = "100001"
OTHERS = ("200002", "300003", "400004", "500005")
POOL = 2000

INSERT_SESSION_SQL = """
INSERT INTO sessions (provider, chat_id, chat_type, user_id, created_at, updated_at)
VALUES ('bench', ?, 'private', ?, ?, ?)
"""
INSERT_MESSAGE_SQL = """
INSERT INTO messages (session_id, owner_user_id, role, content, token_count, created_at) VALUES (?, ?, ?, ?, ?, ?)
"""
# embedded = 1: each chunk's vector is written with it. Left at 0, the busy run's background
# indexing took the 110k filler chunks for new turns and embedded them 256 at a time, so it
# neither stood for the server's work (a new answer's few chunks) nor stopped within minutes.
INSERT_CHUNK_SQL = """
INSERT INTO search_chunks (kind, ref_id, ordinal, owner_user_id, content, content_hash, created_at, embedded)
VALUES ('message', ?, 0, ?, ?, ?, ?, 1)
"""


def vocabulary() -> list[str]:
    """Plain English words from the vendored tokenizer's vocabulary (whole words, 3+ letters)."""
    vocab = json.loads((REPO / "lib/memory/search/data/tokenizer.json").read_text())["model"]["vocab"]
    words = [w for w, i in sorted(vocab.items(), key=lambda kv: kv[1]) if w.isalpha() and w.isascii() and len(w) > 2]
    return words[:20000]


def sentences(rng: np.random.Generator, words: list[str], count: int) -> list[str]:
    # Zipf-like word choice: a few words are everywhere (long posting lists), most are rare.
    weights = 1.0 / np.arange(1, len(words) + 1)
    weights /= weights.sum()
    lengths = rng.integers(6, 25, size=count)
    picks = rng.choice(len(words), size=int(lengths.sum()), p=weights)
    out, at = [], 0
    for n in lengths:
        out.append(" ".join(words[i] for i in picks[at : at + n]).capitalize() + ".")
        at += n
    return out


def fill(conn, settings, rng, words, owner: str, count: int, pool_texts, pool_vectors) -> None:
    key = model_key(settings)
    if not vectors.exists(conn):
        vectors.create(conn, *key)
    texts = sentences(rng, words, count)
    base = rng.integers(0, len(pool_texts), size=count)
    start = 1_600_000_000.0
    with conn:
        conn.execute(INSERT_SESSION_SQL, (owner, owner, iso(start), iso(start)))
        session_id = conn.last_insert_rowid()
        for i in range(count):
            text = f"{pool_texts[base[i]]} {texts[i]}"
            stamp = iso(start + i * 60)
            conn.execute(
                INSERT_MESSAGE_SQL,
                (session_id, owner, "user" if i % 2 == 0 else "assistant", text, len(text) // 4, stamp),
            )
            message_id = conn.last_insert_rowid()
            conn.execute(INSERT_CHUNK_SQL, (message_id, owner, text, content_hash(text), stamp))
            chunk_id = conn.last_insert_rowid()
            noisy = pool_vectors[base[i]] + rng.normal(0, 0.02, size=pool_vectors.shape[1]).astype(np.float32)
            vectors.insert(conn, chunk_id, owner, "message", noisy / np.linalg.norm(noisy))


def timed(fn, queries: list[str]) -> list[float]:
    out = []
    for q in queries:
        started = time.perf_counter()
        fn(q)
        out.append((time.perf_counter() - started) * 1000)
    return out


def report(label: str, values: list[float]) -> None:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    print(f"{label:<44} p50 {statistics.median(values):6.1f} ms   p95 {p95:6.1f} ms")


@contextlib.contextmanager
def busy_machine(settings, enabled: bool, step_aside: bool = True):
    """A busy loop per core in other processes, and this process indexing long answers in a thread
    the way the server does: full text with the turn, vectors in the background, which steps aside
    while a search runs (lib/memory/search/foreground.py; not with `step_aside=False`)."""
    if not enabled:
        yield
        return
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
    stop = threading.Event()
    indexed = []

    def index_answers() -> None:
        from lib.memory import store
        from lib.memory.api import record_turn
        from lib.memory.search import index

        side = connect(settings.database_path)
        session = store.open_session(side, "bench", "busy", "999999", "private")
        steps = " ".join(f"Step {n}: run the command and check the log." for n in range(70))
        while not stop.is_set():
            # A new text each time: every turn's vectors are computed, none comes from the cache.
            answer = f"Here is how to do it, take {len(indexed) + 1}. {steps}"
            record_turn(
                side,
                settings,
                session_id=session.id,
                user_id="999999",
                user_text="And then?",
                answer_text=answer,
                embed=False,
            )
            index.backfill_vectors(side, settings, yield_ceiling=None if step_aside else 0)
            indexed.append(1)
        side.close()

    worker = threading.Thread(target=index_answers, daemon=True)
    worker.start()
    try:
        yield
    finally:
        stop.set()
        worker.join()
        for loop in loops:
            loop.kill()
        print(f"busy: {len(loops)} busy loops, {len(indexed)} turns indexed beside the searches")


@click.command()
@click.option("--messages", type=int, default=100_000, help="Messages of the asking user.")
@click.option("--queries", type=int, default=300, help="Queries to time.")
@click.option("--busy", is_flag=True, help="A busy loop per core and indexing running beside the searches.")
@click.option("--pool", type=int, default=POOL, help="Real sentences embedded for the perturbed vectors.")
@click.option(
    "--no-step-aside",
    is_flag=True,
    help="With --busy: background embedding does not wait for the searches (as before issue 33).",
)
def main(messages: int, queries: int, busy: bool, pool: int, no_step_aside: bool) -> None:
    """Build a database with MESSAGES messages of one user and time retrieval on it."""
    rng = np.random.default_rng(7)
    words = vocabulary()
    with tempfile.TemporaryDirectory(prefix="ash-100k-") as tmp:
        settings = load_settings({"ASH_HOME": tmp})
        conn = connect(settings.database_path)
        migrate.migrate(conn)
        started = time.perf_counter()
        pool_texts = sentences(rng, words, pool)
        pool_vectors = get_embedder(settings).embed(pool_texts)
        embed_seconds = time.perf_counter() - started
        started = time.perf_counter()
        fill(conn, settings, rng, words, USER, messages, pool_texts, pool_vectors)
        for other in OTHERS:
            fill(conn, settings, rng, words, other, 2500, pool_texts, pool_vectors)
        build_seconds = time.perf_counter() - started
        total = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
        size_mb = Path(settings.database_path).stat().st_size / 1e6
        print(
            f"database: {total} messages ({messages} of the asking user), {size_mb:.0f} MB; "
            f"pool embedded in {embed_seconds:.1f} s, rows written in {build_seconds:.1f} s"
        )
        asked = [" ".join(rng.choice(words[200:5000], size=int(rng.integers(3, 9)))) + "?" for _ in range(queries)]
        search_messages(conn, settings, user_id=USER, query="warm up the model and caches")

        def run(mode):
            return lambda q: search_messages(conn, settings, user_id=USER, query=q, limit=10, mode=mode)

        with busy_machine(settings, busy, step_aside=not no_step_aside):
            report("search_messages fts only", timed(run("fts"), asked))
            report("search_messages vector only (query embedded)", timed(run("vector"), asked))
            report(
                "retrieve_context (messages + knowledge)",
                timed(lambda q: retrieve_context(conn, settings, user_id=USER, query=q), asked),
            )
            hybrid = timed(run("hybrid"), asked)
            report("search_messages hybrid (query embedded)", hybrid)
        close_side_connections()  # hybrid searches' second connections, before the file goes
        conn.close()
    print(f"hybrid retrieval p50 at {messages} messages{' (busy)' if busy else ''}: {statistics.median(hybrid):.1f} ms")


if __name__ == "__main__":
    main()
