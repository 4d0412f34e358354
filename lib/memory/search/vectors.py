"""The sqlite-vec index of chunk embeddings: one vec0 table for the configured model and dimension.

Layout (`vec_chunks`): the owner and the kind are partition keys, so a KNN query only ever scans
the asking user's rows of one kind (ownership holds inside the index, and a knowledge search
does not wade through 100k message vectors: 0.3 ms instead of 10 ms); `embedding` is the
sign-quantised vector (bit[N], hamming distance) for a fast coarse pass; the float32 vector is an
auxiliary column used to rescore the coarse candidates exactly (cosine). At 100k rows of one
owner a float KNN takes ~42 ms here, the bit pass ~4 ms.

How many the bit pass hands to the rescoring: on a LoCoMo conversation the 64 nearest by
hamming held about half of the 64 nearest by cosine (multilingual-e5-small), the 256 nearest 96%, and
hybrid R@10 was 0.807 at 64, 0.819 at 128, 0.825 at 256. The bit pass is hamming.py's (numpy over
vec0's storage, about 4 ms at 100k rows for any of these), so every partition gets
COARSE_CANDIDATES. vec0's own bit pass, used under a sqlite-vec release whose storage hamming.py
does not know, costs about rows x candidates (at 100k rows: 9 ms for 64, 34 for 256): there a
partition gets as many as COARSE_BUDGET allows, 256 up to 25k chunks, 64 at 100k (its size read
as the span of its chunk ids: O(log n) on the owner index; an upper bound when several owners'
chunks interleave, which only costs recall).

The model and dimension the table was built for are kept in `meta`; a different configuration
is detected by `lib.memory.search.index.index_status` and fixed by `ash memory reindex`.
"""

from __future__ import annotations

import apsw
import numpy as np

from lib.db import immediate, one
from lib.memory.search import hamming

TABLE = "vec_chunks"
GLOBAL_OWNER = "*"  # partition of knowledge marked global (owner_user_id NULL)
META_MODEL = "vectors.model"
META_DIMENSIONS = "vectors.dimensions"
COARSE_CANDIDATES = 256
COARSE_BUDGET = 6_400_000  # rows x candidates
# Two subqueries: SQLite answers a lone max() or min() from the index's end, but scans for both.
SPAN_SQL = """
SELECT (SELECT max(id) FROM search_chunks WHERE owner_user_id IS :owner AND kind = :kind)
     - (SELECT min(id) FROM search_chunks WHERE owner_user_id IS :owner AND kind = :kind) + 1
"""

CREATE_SQL = """
CREATE VIRTUAL TABLE vec_chunks USING vec0 (
    chunk_id INTEGER PRIMARY KEY,
    owner TEXT PARTITION KEY,
    kind TEXT PARTITION KEY,
    embedding BIT[{dimensions}],
    +vector BLOB
)
"""
INSERT_SQL = "INSERT INTO vec_chunks (chunk_id, owner, kind, embedding, vector) VALUES (?, ?, ?, vec_bit(?), ?)"
DELETE_SQL = "DELETE FROM vec_chunks WHERE chunk_id = ?"
KNN_SQL = """
SELECT chunk_id, vector FROM vec_chunks
WHERE embedding MATCH vec_bit(?) AND k = ? AND owner = ? AND kind = ?
ORDER BY distance
"""
VECTOR_SQL = "SELECT vector FROM vec_chunks WHERE chunk_id = ?"
SET_META_SQL = "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"


def exists(conn: apsw.Connection) -> bool:
    """True when the vec0 table has been created."""
    return one(conn, "SELECT 1 AS x FROM sqlite_schema WHERE name = ?", (TABLE,)) is not None


def stored_model(conn: apsw.Connection) -> tuple[str, int] | None:
    """(model, dimensions) the table was built for, or None if there is no table."""
    if not exists(conn):
        return None
    model = one(conn, "SELECT value FROM meta WHERE key = ?", (META_MODEL,))
    dims = one(conn, "SELECT value FROM meta WHERE key = ?", (META_DIMENSIONS,))
    if model is None or dims is None:
        return None
    return model["value"], int(dims["value"])


def create(conn: apsw.Connection, model: str, dimensions: int, *, replace: bool = False) -> None:
    """Create the table for `model`/`dimensions` (dropping an existing one when `replace`)."""
    if dimensions % 8:
        raise ValueError("binary quantisation needs a dimension divisible by 8")
    with immediate(conn):
        if replace:
            conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
        conn.execute(CREATE_SQL.format(dimensions=int(dimensions)))
        conn.execute(SET_META_SQL, (META_MODEL, model))
        conn.execute(SET_META_SQL, (META_DIMENSIONS, str(int(dimensions))))


def drop(conn: apsw.Connection) -> None:
    """Remove the table and its bookkeeping (embeddings turned off)."""
    with immediate(conn):
        conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
        conn.execute("DELETE FROM meta WHERE key IN (?, ?)", (META_MODEL, META_DIMENSIONS))


def normalise(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (cosine similarity becomes a dot product)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.clip(norms, 1e-12, None)).astype(np.float32)


def quantise(vector: np.ndarray) -> bytes:
    """Sign bits of a vector, packed 8 per byte (vec0's bit[] layout)."""
    return np.packbits(vector > 0).tobytes()


def insert(conn: apsw.Connection, chunk_id: int, owner: str | None, kind: str, vector: np.ndarray) -> None:
    """Store one chunk's vector (call inside the caller's transaction)."""
    vector = np.asarray(vector, dtype=np.float32)
    conn.execute(INSERT_SQL, (chunk_id, owner or GLOBAL_OWNER, kind, quantise(vector), vector.tobytes()))


def from_blob(blob: bytes) -> np.ndarray:
    """A stored vector (the `vector` column) as an array."""
    return np.frombuffer(blob, dtype=np.float32)


def delete(conn: apsw.Connection, chunk_ids: list[int]) -> None:
    """Remove the vectors of these chunks (no-op for ids without one)."""
    for chunk_id in chunk_ids:
        conn.execute(DELETE_SQL, (chunk_id,))


def knn(
    conn: apsw.Connection, query: np.ndarray, *, owner: str | None, kind: str, candidates: int
) -> list[tuple[int, float]]:
    """The `candidates` nearest chunks of one owner (None: global) and kind: a hamming pass over
    COARSE_CANDIDATES or more (hamming.py; vec0's own, as wide as the partition's size allows,
    where hamming.py cannot read the storage), rescored by cosine.

    Returns (chunk_id, cosine similarity), best first.
    """
    query = np.asarray(query, dtype=np.float32)
    bits = quantise(query)
    partitions = (str(owner) if owner else GLOBAL_OWNER, kind)  # stored as text
    found = hamming.nearest(conn, TABLE, bits, partitions, max(candidates, COARSE_CANDIDATES))
    if found is None:  # a sqlite-vec release whose storage hamming.py does not know: vec0's own pass
        rows = conn.execute(SPAN_SQL, {"owner": owner, "kind": kind}).fetchone()[0] or 1
        coarse = max(candidates, min(COARSE_CANDIDATES, COARSE_BUDGET // rows))
        found = conn.execute(KNN_SQL, (bits, coarse, *partitions)).fetchall()
    if not found:
        return []
    ids = [row[0] for row in found]
    matrix = np.frombuffer(b"".join(row[1] for row in found), dtype=np.float32).reshape(len(found), -1)
    scores = matrix @ query  # both sides are L2-normalised: dot product = cosine
    order = np.argsort(-scores, kind="stable")[:candidates]
    return [(ids[i], float(scores[i])) for i in order]


def similarities(conn: apsw.Connection, query: np.ndarray, chunk_ids: list[int]) -> dict[int, float]:
    """Cosine similarity of the query to each of these chunks that has a vector (for candidates
    another ranker found, whatever their place in a KNN): their stored vectors read in one query
    where hamming.py knows the storage, else one vec0 point lookup each (50 of them took 2.5 ms
    of a prompt's retrieval at 100k messages)."""
    if not chunk_ids or not exists(conn):
        return {}
    query = np.asarray(query, dtype=np.float32)
    stored = hamming.auxiliary(conn, TABLE, chunk_ids)
    if stored is None:
        stored = {}
        for chunk_id in chunk_ids:
            row = conn.execute(VECTOR_SQL, (chunk_id,)).fetchone()
            if row is not None:
                stored[chunk_id] = row[0]
    return {chunk_id: float(from_blob(blob) @ query) for chunk_id, blob in stored.items()}


def count(conn: apsw.Connection) -> int:
    """Vectors stored (0 without a table)."""
    if not exists(conn):
        return 0
    return conn.execute(f"SELECT count(*) FROM {TABLE}").fetchone()[0]


def ids(conn: apsw.Connection) -> set[int]:
    """Every chunk id that has a vector."""
    if not exists(conn):
        return set()
    return {row[0] for row in conn.execute(f"SELECT chunk_id FROM {TABLE}")}
