"""Questions being answered now, so that background indexing steps aside for them.

On two busy cores a hybrid query took 168 ms p50 against 20 ms on a quiet machine (issue 33):
the query's own embedding and search compete for the cores with the embedding passes for new
turns and documents, which the server runs in the background (lib/memory/service.py,
`embed_pending`). So every search holds `answering()` while it runs, and background embedding
(lib/memory/search/index.py, `backfill_vectors`) embeds in slices of SLICE chunks, waiting
before each until no question is being answered. The wait has a ceiling, YIELD_CEILING: under
constant traffic indexing still moves (a new turn is found by its words meanwhile, its vector
follows).

Stepping aside acts only between slices, and a slice already in the engine cannot be stopped: on
two busy cores a question's embedding waited ~300 ms behind it. So background embedding also
runs `in_background()`, which the local model reads to embed on a thread of its own at a low
CPU priority (lib/memory/search/e5.py): a question's embedding runs beside the slice instead of
after it, and takes the cores first.

A CLI reindex runs in a process of its own and does not see these questions; its embedding is
background work too (`reindex_all`), so it runs at the low priority and a server's questions
still take the cores first.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

SLICE = 8
YIELD_CEILING = 2.0

_lock = threading.Lock()
_idle = threading.Event()
_idle.set()
_answering = 0
_local = threading.local()


@contextmanager
def answering() -> Iterator[None]:
    """Mark a question as being answered for the duration (nests, and counts across threads)."""
    global _answering
    with _lock:
        _answering += 1
        _idle.clear()
    try:
        yield
    finally:
        with _lock:
            _answering -= 1
            if _answering == 0:
                _idle.set()


def while_answering[**P, R](search: Callable[P, R]) -> Callable[P, R]:
    """A search that holds `answering()` while it runs."""

    @functools.wraps(search)
    def searching(*args: P.args, **kwargs: P.kwargs) -> R:
        with answering():
            return search(*args, **kwargs)

    return searching


def step_aside(ceiling: float | None = None) -> bool:
    """Wait until no question is being answered, for at most `ceiling` seconds (YIELD_CEILING
    by default). True when nothing was being answered by the end of the wait."""
    return _idle.is_set() or _idle.wait(YIELD_CEILING if ceiling is None else ceiling)


def answering_now() -> int:
    """How many searches for a question are running now."""
    return _answering


@contextmanager
def in_background() -> Iterator[None]:
    """Mark the embedding done by this thread meanwhile as background work (nests)."""
    depth = getattr(_local, "background", 0)
    _local.background = depth + 1
    try:
        yield
    finally:
        _local.background = depth


def background_now() -> bool:
    """True inside `in_background()` on this thread."""
    return getattr(_local, "background", 0) > 0
