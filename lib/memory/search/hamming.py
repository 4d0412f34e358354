"""The coarse (hamming) pass of a vector search, in numpy over vec0's own storage.

sqlite-vec's bit KNN keeps its best k in a sorted array, so its cost grows with rows x k: at
100k rows of one owner 9 to 10 ms for 64 candidates, 34 ms for 256, and 15 ms for 64 beside the
full-text query a hybrid search runs at the same time (bench/retrieval_100k.py, 2026-12-06).
Reading the partition's packed sign bits straight from the table's storage (one row per 1,024
vectors) and counting differing bits in numpy takes about 4 ms for any k up to a few hundred,
so the pass can hand the exact rescoring a wide set at every size.

The storage is sqlite-vec's, not a public interface: it is read only under the versions whose
layout is known (LAYOUT_VERSIONS, checked once per process) and only while the tables look as
expected; otherwise `nearest` returns None and the caller asks vec0 itself. Both see the same
snapshot of the database (same connection), so nothing here can go stale.
"""

from __future__ import annotations

import json
import threading

import apsw
import numpy as np

# sqlite-vec releases whose shadow tables this module reads (requirements.lock pins one): each
# partition's vectors in rows of `{table}_chunks` (a validity bitmap, least significant bit
# first, and the rowids, int64) with the packed vectors in `{table}_vector_chunks00`, and the
# auxiliary (+) columns in `{table}_auxiliary` by rowid. tests/memory/test_memory_hamming.py
# compares this pass to vec0's own on the pinned release.
LAYOUT_VERSIONS = frozenset({"v0.1.9"})
CHUNKS_SQL = """
SELECT c.validity, c.rowids, v.vectors
FROM "{table}_chunks" c JOIN "{table}_vector_chunks00" v ON v.rowid = c.chunk_id
WHERE c.partition00 = ? AND c.partition01 = ?
"""
AUXILIARY_SQL = 'SELECT rowid, value00 FROM "{table}_auxiliary" WHERE rowid IN (SELECT value FROM json_each(?))'
FAR = np.iinfo(np.int32).max  # the distance given to empty and deleted slots

_version_lock = threading.Lock()
_known_layout: bool | None = None


def layout_known(conn: apsw.Connection) -> bool:
    """True when the loaded sqlite-vec is a release whose storage this module reads (the
    extension is loaded once per process, so is its version)."""
    global _known_layout
    with _version_lock:
        if _known_layout is None:
            try:
                _known_layout = conn.execute("SELECT vec_version()").fetchone()[0] in LAYOUT_VERSIONS
            except apsw.Error:
                _known_layout = False
        return _known_layout


def nearest(
    conn: apsw.Connection, table: str, query_bits: bytes, partitions: tuple[str, str], k: int
) -> list[tuple[int, bytes]] | None:
    """The `k` rows of one partition nearest to `query_bits` by hamming distance, nearest first,
    each as (rowid, its auxiliary `value00` column); None when the storage is not as expected."""
    if not layout_known(conn):
        return None
    try:
        found = conn.execute(CHUNKS_SQL.format(table=table), partitions).fetchall()
    except apsw.SQLError:
        return None
    if not found:
        return []
    read = _distances(found, query_bits)
    if read is None:
        return None
    rowids, distances, live = read
    k = min(k, live)
    if k <= 0:
        return []
    picked = np.argpartition(distances, k - 1)[:k] if k < len(distances) else np.arange(len(distances))
    picked = picked[np.argsort(distances[picked], kind="stable")]
    ids = [int(rowid) for rowid in rowids[picked]]
    stored = auxiliary(conn, table, ids)
    if stored is None:
        return None
    return [(rowid, stored[rowid]) for rowid in ids if rowid in stored]


def auxiliary(conn: apsw.Connection, table: str, rowids: list[int]) -> dict[int, bytes] | None:
    """The auxiliary `value00` column of these rows, by rowid, in one query (a deleted row has
    none); None when the storage is not as expected."""
    if not layout_known(conn):
        return None
    try:
        return dict(conn.execute(AUXILIARY_SQL.format(table=table), (json.dumps(rowids),)).fetchall())
    except apsw.SQLError:
        return None


def _distances(found: list[tuple], query_bits: bytes) -> tuple[np.ndarray, np.ndarray, int] | None:
    """(rowids, differing bits with the query, live rows) over the stored rows of vectors, each
    (validity, rowids, packed vectors); a deleted or empty slot is FAR. None if a row is not
    laid out as expected.

    The rows' vectors are copied once into one writable array and XOR-ed in place: counting row
    by row (some 100 rows of 1,024 vectors at 100k) cost ten numpy calls a row, and XOR into a
    new array allocated the partition's 4.8 MB again per search (4.0-4.4 -> 2.5-2.8 ms median at
    100k, the two side by side, 2026-12-07)."""
    word = np.uint64 if len(query_bits) % 8 == 0 else np.uint8
    query = np.frombuffer(query_bits, dtype=word)
    for validity, ids, packed in found:
        count = len(ids) // 8
        if len(validity) * 8 != count or len(ids) != count * 8 or len(packed) != count * len(query_bits):
            return None
    bits = np.concatenate([np.frombuffer(packed, dtype=word) for _, _, packed in found]).reshape(-1, len(query))
    np.bitwise_xor(bits, query, out=bits)
    distances = _row_sums(np.bitwise_count(bits))
    rowids = np.frombuffer(b"".join(ids for _, ids, _ in found), dtype=np.int64)
    valid = np.unpackbits(
        np.frombuffer(b"".join(validity for validity, _, _ in found), dtype=np.uint8), bitorder="little"
    )
    distances[valid == 0] = FAR
    return rowids, distances, int(np.count_nonzero(valid))


def _row_sums(counts: np.ndarray) -> np.ndarray:
    """Each row's sum, as int32. Column by column: numpy's sum along a short row is several
    times slower."""
    out = counts[:, 0].astype(np.int32)
    for column in range(1, counts.shape[1]):
        out += counts[:, column]
    return out
