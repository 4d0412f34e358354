"""The coarse vector pass in numpy over vec0's storage (lib/memory/search/hamming.py) against
vec0's own, on a real SQLite file with the pinned sqlite-vec.

Random vectors written straight into the vec0 table: the test is about the index, not a model.
"""

from __future__ import annotations

from contextlib import closing

import numpy as np
import pytest

from lib.memory.search import hamming, vectors
from tests.support.memory_retrieval import open_db, settings_with

ALICE, BOB = "1001", "2002"
DIMENSIONS = 384
VEC0_DISTANCES_SQL = """
SELECT chunk_id, distance FROM vec_chunks
WHERE embedding MATCH vec_bit(?) AND k = ? AND owner = ? AND kind = ?
ORDER BY distance
"""


@pytest.fixture
def filled(ash_home):
    """A vec0 table holding 2,600 random vectors: Alice's messages (every seventh deleted again),
    Bob's messages, and global knowledge; the stored vectors by chunk id."""
    settings = settings_with(ash_home, '[embeddings]\nprovider = "none"\n')
    rng = np.random.default_rng(5)
    stored = {}
    with closing(open_db(settings)) as conn:
        vectors.create(conn, "random", DIMENSIONS)
        layout = [(ALICE, "message", 2100), (BOB, "message", 400), (None, "memory", 100)]
        with conn:
            chunk_id = 0
            for owner, kind, count in layout:
                for _ in range(count):
                    chunk_id += 1
                    vector = vectors.normalise(rng.normal(size=(1, DIMENSIONS)))[0]
                    vectors.insert(conn, chunk_id, owner, kind, vector)
                    stored[chunk_id] = (owner, kind, vector)
            deleted = [c for c, (owner, _, _) in stored.items() if owner == ALICE and c % 7 == 0]
            vectors.delete(conn, deleted)
        for chunk_id in deleted:
            del stored[chunk_id]
        yield conn, stored, rng


def _vec0_pass(conn, query_bits: bytes, owner: str, kind: str, k: int) -> list[tuple[int, int]]:
    return [(r[0], int(r[1])) for r in conn.execute(VEC0_DISTANCES_SQL, (query_bits, k, owner, kind))]


def _hamming(a: bytes, b: bytes) -> int:
    return int(np.unpackbits(np.frombuffer(a, np.uint8) ^ np.frombuffer(b, np.uint8)).sum())


def test_the_numpy_pass_finds_what_vec0_finds(filled):
    """Same distances as vec0's own bit KNN, in each partition, never a deleted or another
    owner's row, each with its stored float vector."""
    conn, stored, rng = filled
    assert hamming.layout_known(conn)  # the pinned release: the pass below is the one knn uses
    for owner, kind in ((ALICE, "message"), (BOB, "message"), (vectors.GLOBAL_OWNER, "memory")):
        for k in (1, 10, 64, 256):
            query = vectors.normalise(rng.normal(size=(1, DIMENSIONS)))[0]
            bits = vectors.quantise(query)
            found = hamming.nearest(conn, vectors.TABLE, bits, (owner, kind), k)
            expected = _vec0_pass(conn, bits, owner, kind, k)
            ours = [(chunk_id, _hamming(bits, vectors.quantise(stored[chunk_id][2]))) for chunk_id, _ in found]
            assert [d for _, d in ours] == [d for _, d in expected]
            # Ties at the last distance may pick different rows; every row nearer is the same.
            last = expected[-1][1]
            assert {c for c, d in ours if d < last} == {c for c, d in expected if d < last}
            for chunk_id, blob in found:
                assert (stored[chunk_id][0] or vectors.GLOBAL_OWNER, stored[chunk_id][1]) == (owner, kind)
                assert np.array_equal(vectors.from_blob(blob), stored[chunk_id][2])


def test_knn_does_not_ask_vec0_under_the_pinned_release(filled, monkeypatch):
    conn, stored, rng = filled
    monkeypatch.setattr(vectors, "KNN_SQL", "SELECT no_such_column FROM vec_chunks")
    query = vectors.normalise(rng.normal(size=(1, DIMENSIONS)))[0]
    found = vectors.knn(conn, query, owner=BOB, kind="message", candidates=5)
    exact = sorted((c for c, (owner, _, _) in stored.items() if owner == BOB), key=lambda c: -stored[c][2] @ query)
    assert [chunk_id for chunk_id, _ in found] == exact[:5]


def test_an_unknown_release_gets_vec0s_own_pass_and_the_same_answer(filled, monkeypatch):
    conn, _, rng = filled
    query = vectors.normalise(rng.normal(size=(1, DIMENSIONS)))[0]
    ours = vectors.knn(conn, query, owner=BOB, kind="message", candidates=10)
    monkeypatch.setattr(hamming, "_known_layout", False)
    assert hamming.nearest(conn, vectors.TABLE, vectors.quantise(query), (BOB, "message"), 10) is None
    assert vectors.knn(conn, query, owner=BOB, kind="message", candidates=10) == ours


def test_storage_that_is_not_as_expected_gets_vec0s_pass(filled):
    conn, _, rng = filled
    bits = vectors.quantise(vectors.normalise(rng.normal(size=(1, DIMENSIONS)))[0])
    assert hamming.nearest(conn, "no_such_table", bits, (BOB, "message"), 10) is None


def test_similarities_read_the_stored_vectors_in_one_query_under_the_pinned_release(filled, monkeypatch):
    """Every asked chunk that has a vector gets its exact cosine (a deleted one none), with vec0's
    point lookup broken; under an unknown release the point lookups give the same answer."""
    conn, stored, rng = filled
    query = vectors.normalise(rng.normal(size=(1, DIMENSIONS)))[0]
    asked = [1, 7, 14, 2101, 2550, 99999]  # Alice's, two of hers deleted, Bob's, global, none
    expected = {c: pytest.approx(float(stored[c][2] @ query), abs=1e-6) for c in asked if c in stored}
    assert set(expected) == {1, 2101, 2550}
    monkeypatch.setattr(vectors, "VECTOR_SQL", "SELECT no_such_column FROM vec_chunks")
    assert vectors.similarities(conn, query, asked) == expected
    monkeypatch.undo()
    monkeypatch.setattr(hamming, "_known_layout", False)
    assert vectors.similarities(conn, query, asked) == expected
