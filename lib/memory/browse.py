"""Read-only views of memory for operators: sessions, their messages, user summaries, JSON export.

Shared by the admin API and the CLI so both show the same thing.
"""

from __future__ import annotations

import json

import apsw

from lib.db import now_iso, one, rows
from lib.memory import store

SESSION_COLUMNS = """
s.id, s.provider, s.chat_id, s.chat_type, s.user_id, s.title, s.created_at, s.updated_at, s.closed_at,
(s.summary IS NOT NULL) AS has_summary,
(SELECT count(*) FROM messages m WHERE m.session_id = s.id) AS message_count
"""
SESSIONS_SQL = f"""
SELECT {SESSION_COLUMNS} FROM sessions s
WHERE :user IS NULL OR s.user_id = :user
   OR EXISTS (SELECT 1 FROM messages m WHERE m.session_id = s.id AND m.owner_user_id = :user)
ORDER BY s.updated_at DESC, s.id DESC
LIMIT :limit
"""
SESSION_SQL = f"SELECT {SESSION_COLUMNS} FROM sessions s WHERE s.id = ?"
SESSION_MESSAGES_SQL = f"""
SELECT {store.MESSAGE_COLUMNS} FROM messages WHERE session_id = :session AND id > :after ORDER BY id LIMIT :limit
"""
EXPORT_MESSAGE_COLUMNS = "id, session_id, owner_user_id, role, content, token_count, created_at, update_id, metadata"
USER_COUNTS_SQL = """
SELECT
    (SELECT count(*) FROM messages WHERE owner_user_id = :user) AS messages,
    (SELECT count(*) FROM memories WHERE owner_user_id = :user) AS memories,
    (SELECT count(*) FROM memories WHERE owner_user_id = :user AND superseded_by IS NULL
        AND (expires_at IS NULL OR expires_at > :now)) AS active_memories,
    (SELECT count(*) FROM sessions WHERE user_id = :user) AS sessions
"""
PROFILE_SQL = "SELECT * FROM user_profiles WHERE user_id = ?"
PROFILES_SQL = "SELECT user_id, username, display_name, timezone FROM user_profiles ORDER BY user_id"
EXPORT_PROFILES_SQL = "SELECT * FROM user_profiles WHERE :user IS NULL OR user_id = :user ORDER BY user_id"
EXPORT_SESSIONS_SQL = """
SELECT * FROM sessions s WHERE :user IS NULL OR s.user_id = :user
   OR EXISTS (SELECT 1 FROM messages m WHERE m.session_id = s.id AND m.owner_user_id = :user)
ORDER BY id
"""
EXPORT_MESSAGES_SQL = (
    f"SELECT {EXPORT_MESSAGE_COLUMNS} FROM messages WHERE :user IS NULL OR owner_user_id = :user ORDER BY id"
)
EXPORT_MEMORIES_SQL = """
SELECT * FROM memories WHERE :user IS NULL OR owner_user_id = :user OR is_global = 1 ORDER BY id
"""


def _decode(row: dict, *fields: str) -> dict:
    for name in fields:
        if isinstance(row.get(name), str):
            row[name] = json.loads(row[name])
    return row


def sessions(conn: apsw.Connection, *, user_id: str | None = None, limit: int = 50) -> list[dict]:
    """Sessions newest first: all, or those a user started or wrote in."""
    found = rows(conn, SESSIONS_SQL, {"user": user_id, "limit": limit})
    return [{**r, "has_summary": bool(r["has_summary"])} for r in found]


def session(conn: apsw.Connection, session_id: int) -> dict | None:
    """One session with its message count, or None."""
    found = one(conn, SESSION_SQL, (session_id,))
    return {**found, "has_summary": bool(found["has_summary"])} if found else None


def session_messages(
    conn: apsw.Connection, session_id: int, *, after_id: int = 0, limit: int = 200
) -> list[store.StoredMessage]:
    """A session's messages in order, after `after_id`."""
    found = rows(conn, SESSION_MESSAGES_SQL, {"session": session_id, "after": after_id, "limit": limit})
    return [store.stored_message(r) for r in found]


def profiles(conn: apsw.Connection) -> list[dict]:
    """Who Ash has a profile for: id, username, name and time zone of each."""
    return rows(conn, PROFILES_SQL)


def _memory(row: dict) -> dict:
    # The export says true/false, as the API does; the column holds 0/1.
    return {**_decode(row, "metadata"), "is_global": bool(row["is_global"])}


def user_summary(conn: apsw.Connection, user_id: str) -> dict | None:
    """A user's profile and row counts, or None when Ash holds nothing about them."""
    profile = one(conn, PROFILE_SQL, (user_id,))
    counts = one(conn, USER_COUNTS_SQL, {"user": user_id, "now": now_iso()})
    if profile is None and not any(counts.values()):
        return None
    base = _decode(dict(profile), "preferences") if profile else {"user_id": user_id, "notes": "", "preferences": {}}
    return {**base, "counts": counts}


def export(conn: apsw.Connection, user_id: str | None = None) -> dict:
    """Everything about one user (their profile, sessions, messages, own and global knowledge) or
    about everyone, as plain JSON-ready data. Index tables are left out: they are rebuildable."""
    params = {"user": user_id}
    with conn:  # one read transaction: a consistent picture while the server writes
        return {
            "exported_at": now_iso(),
            "user_id": user_id,
            "profiles": [_decode(r, "preferences") for r in rows(conn, EXPORT_PROFILES_SQL, params)],
            "sessions": [_decode(r, "metadata") for r in rows(conn, EXPORT_SESSIONS_SQL, params)],
            "messages": [_decode(r, "metadata") for r in rows(conn, EXPORT_MESSAGES_SQL, params)],
            "memories": [_memory(r) for r in rows(conn, EXPORT_MEMORIES_SQL, params)],
        }
