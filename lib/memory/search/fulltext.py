"""The full-text queries of a search: FTS5 BM25 over the chunks, scoped to what the asker may see
inside the SQL (before ranking and limiting)."""

from __future__ import annotations

import apsw

from lib.db import rows

# CROSS JOIN fixes the join order: the MATCH first, each hit's chunk row by its rowid. Once
# `PRAGMA optimize` has written sqlite_stat1 (every connection runs it), a user owning most chunks
# made the planner walk search_chunks_owner and run the full MATCH once per chunk: 500-900 ms per
# query on a 1,100-turn LoCoMo database instead of ~1 ms.
#
# Messages, not chunks, are counted to `n`, each by its best chunk: a long answer of Ash's is
# several chunks, and on BEAM's assistant chats the 50 best chunks were 28 messages (median; 50
# on LoCoMo, one chunk a turn), so the user's short turn that says the fact fell off the list.
# MATERIALIZED keeps bm25() out of the GROUP BY: SQLite flattens a plain subquery into it, and
# FTS5 refuses bm25() inside an aggregate ("unable to use function bm25 in the requested context").
FTS_MESSAGES_SQL = """
WITH hits AS MATERIALIZED (
    SELECT c.ref_id AS ref_id, bm25(search_fts) AS score
    FROM search_fts
    CROSS JOIN search_chunks c ON c.id = search_fts.rowid
    WHERE search_fts MATCH :q AND c.kind = 'message' AND c.owner_user_id = :owner
)
SELECT ref_id, min(score) AS rank_score FROM hits GROUP BY ref_id ORDER BY rank_score LIMIT :n
"""
FTS_KNOWLEDGE_SQL = """
SELECT c.ref_id AS ref_id, bm25(search_fts) AS rank_score
FROM search_fts
CROSS JOIN search_chunks c ON c.id = search_fts.rowid
CROSS JOIN memories m ON m.id = c.ref_id
WHERE search_fts MATCH :q AND c.kind = 'memory'
  AND (c.owner_user_id = :owner OR c.owner_user_id IS NULL)
  AND (m.owner_user_id = :owner OR m.is_global = 1)
  AND (:include_superseded OR m.superseded_by IS NULL) AND (m.expires_at IS NULL OR m.expires_at > :now)
ORDER BY rank_score
LIMIT :n
"""
# The same ranking in two steps: the best PREFIX matches of everyone's chunks first (FTS5
# scores every match either way), then only those looked up in search_chunks. The lookup per
# match was half of the query: at 100k messages 6 to 9 ms for the one above, 4 to 5 ms for this
# one (bench/retrieval_100k.py, 2026-12-06). Exact whenever the prefix holds `n` of the asker's
# messages (a message with any chunk in the prefix has its best chunk there) or every match;
# otherwise (their messages are a small share of the index) the query above answers
# (message_matches).
FTS_MESSAGES_PREFIX_SQL = """
WITH best AS MATERIALIZED (
    SELECT rowid, bm25(search_fts) AS score FROM search_fts WHERE search_fts MATCH :q ORDER BY score LIMIT :prefix
)
SELECT c.ref_id AS ref_id, min(best.score) AS rank_score
FROM best CROSS JOIN search_chunks c ON c.id = best.rowid
WHERE c.kind = 'message' AND c.owner_user_id = :owner
GROUP BY c.ref_id
ORDER BY rank_score
LIMIT :n
"""
PREFIX = 400


def message_matches(conn: apsw.Connection, expression: str, user_id: str, n: int) -> list[dict]:
    """The asker's `n` best messages for the FTS5 `expression` (each by its best chunk), best first."""
    params = {"q": expression, "owner": user_id, "n": n, "prefix": PREFIX}
    found = rows(conn, FTS_MESSAGES_PREFIX_SQL, params)
    if len(found) < n and _matches_beyond(conn, expression, PREFIX):
        found = rows(conn, FTS_MESSAGES_SQL, params)
    return found


def _matches_beyond(conn: apsw.Connection, expression: str, prefix: int) -> bool:
    """True when more than `prefix` chunks match (the prefix query may have missed some)."""
    sql = "SELECT count(*) FROM (SELECT 1 FROM search_fts WHERE search_fts MATCH ? LIMIT ?)"
    return conn.execute(sql, (expression, prefix + 1)).fetchone()[0] > prefix
