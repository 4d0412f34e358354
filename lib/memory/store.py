"""Canonical rows: sessions, messages and user profiles (raw apsw SQL, values always bound)."""

from __future__ import annotations

import json
import zoneinfo
from dataclasses import dataclass
from typing import Any

import apsw

from lib.db import immediate, now_iso, one, rows
from lib.tokens import estimate_tokens

# Keys of a user message's metadata when part of it came from someone else (a forward, a quoted
# message, a document): the names of that outside content, and what the person typed themselves.
ORIGIN_OUTSIDE = "outside"
ORIGIN_TYPED = "typed"
# The outside content the message's whole turn held (a web page it fetched, a tool's output): read
# by fact extraction only, whose facts from such a turn wait for review (lib/memory/review.py).
HELD_OUTSIDE = "held_outside"


@dataclass(frozen=True)
class Session:
    id: int
    provider: str
    chat_id: str
    chat_type: str
    user_id: str
    summary: str | None = None
    summary_through: int | None = None
    # The outside content (forwards, quotes, documents: lib/agent/approval.py) of the messages the
    # summary folded in: the summary may repeat their words, so it is outside content too.
    summary_outside: tuple[str, ...] = ()


@dataclass(frozen=True)
class StoredMessage:
    """One message as stored: what the agent's history and the admin API read, as it is."""

    id: int
    session_id: int
    owner_user_id: str
    role: str
    content: str
    token_count: int
    created_at: str
    update_id: int | None
    metadata: dict[str, Any]
    speaker_user_id: str | None


@dataclass(frozen=True)
class Profile:
    user_id: str
    username: str | None
    display_name: str | None
    notes: str
    preferences: dict
    timezone: str | None


OPEN_SESSION_SQL = """
SELECT id, provider, chat_id, chat_type, user_id, summary, summary_through,
       json_extract(metadata, '$.summary_outside') AS summary_outside
FROM sessions WHERE provider = ? AND chat_id = ? AND closed_at IS NULL
"""
INSERT_SESSION_SQL = """
INSERT INTO sessions (provider, chat_id, chat_type, user_id, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (provider, chat_id) WHERE closed_at IS NULL DO NOTHING
"""
INSERT_MESSAGE_SQL = """
INSERT INTO messages (session_id, owner_user_id, role, content, token_count, created_at, update_id, metadata,
                      speaker_user_id)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
MESSAGE_COLUMNS = (
    "id, session_id, owner_user_id, role, content, token_count, created_at, metadata, speaker_user_id, update_id"
)
RECENT_MESSAGES_SQL = f"""
SELECT * FROM (
    SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = ? AND id > ? ORDER BY id DESC LIMIT ?
) ORDER BY id
"""
UPSERT_PROFILE_SQL = """
INSERT INTO user_profiles (user_id, username, display_name, created_at, updated_at)
VALUES (?, ?, ?, ?, ?)
ON CONFLICT (user_id) DO UPDATE SET
    username = coalesce(excluded.username, username),
    display_name = coalesce(excluded.display_name, display_name),
    updated_at = CASE
        WHEN excluded.username IS NOT username OR excluded.display_name IS NOT display_name
        THEN excluded.updated_at ELSE updated_at END
"""


def _session(row: dict) -> Session:
    outside = tuple(json.loads(row.pop("summary_outside") or "[]"))
    return Session(**row, summary_outside=outside)


def open_session(conn: apsw.Connection, provider: str, chat_id: str, user_id: str, chat_type: str) -> Session:
    """The chat's open session, created on first use (safe under concurrent callers)."""
    found = one(conn, OPEN_SESSION_SQL, (provider, chat_id))
    if found:
        return _session(found)
    stamp = now_iso()
    with immediate(conn):
        conn.execute(INSERT_SESSION_SQL, (provider, chat_id, chat_type, user_id, stamp, stamp))
        return _session(one(conn, OPEN_SESSION_SQL, (provider, chat_id)))


MOVE_SESSIONS_SQL = """
UPDATE sessions SET chat_id = :new, chat_type = :type, updated_at = :now
WHERE provider = :provider AND chat_id = :old
"""
# Both ids have an open session (the supergroup was answered before the move was known): the
# new id's is closed, and the group's conversation goes on in the old one, now under the new id.
CLOSE_NEWER_SQL = """
UPDATE sessions SET closed_at = :now
WHERE provider = :provider AND chat_id = :new AND closed_at IS NULL
  AND EXISTS (SELECT 1 FROM sessions WHERE provider = :provider AND chat_id = :old AND closed_at IS NULL)
"""


def move_sessions(conn: apsw.Connection, provider: str, old_chat_id: str, new_chat_id: str, chat_type: str) -> int:
    """A chat's sessions under its new id (a group upgraded to a supergroup); returns how many."""
    params = {"provider": provider, "old": old_chat_id, "new": new_chat_id, "type": chat_type, "now": now_iso()}
    with immediate(conn):
        conn.execute(CLOSE_NEWER_SQL, params)
        conn.execute(MOVE_SESSIONS_SQL, params)
        return conn.changes()


def close_session(conn: apsw.Connection, provider: str, chat_id: str) -> bool:
    """Close the chat's open session (`/new`); memory is kept. True if one was open."""
    with immediate(conn):
        conn.execute(
            "UPDATE sessions SET closed_at = ? WHERE provider = ? AND chat_id = ? AND closed_at IS NULL",
            (now_iso(), provider, chat_id),
        )
        return conn.changes() > 0


def add_message(
    conn: apsw.Connection,
    session_id: int,
    owner_user_id: str,
    role: str,
    content: str,
    *,
    update_id: int | None = None,
    metadata: dict | None = None,
    created_at: str | None = None,
    speaker_user_id: str | None = None,
) -> int:
    """Append a message to a session; returns its id (`created_at` for imported history).
    `owner_user_id` is whose memory it is (lib/memory/scope.py), `speaker_user_id` who wrote it."""
    stamp = created_at or now_iso()
    with immediate(conn):
        conn.execute(
            INSERT_MESSAGE_SQL,
            (
                session_id,
                owner_user_id,
                role,
                content,
                estimate_tokens(content),
                stamp,
                update_id,
                json.dumps(metadata or {}),
                speaker_user_id,
            ),
        )
        message_id = conn.last_insert_rowid()
        conn.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (stamp, session_id))
    return message_id


def recent_messages(conn: apsw.Connection, session_id: int, limit: int, after_id: int = 0) -> list[StoredMessage]:
    """The last `limit` messages of a session after `after_id`, oldest first."""
    return [stored_message(r) for r in rows(conn, RECENT_MESSAGES_SQL, (session_id, after_id, limit))]


def stored_message(row: dict) -> StoredMessage:
    """A message read with MESSAGE_COLUMNS."""
    return StoredMessage(**{**row, "metadata": json.loads(row["metadata"])})


def touch_profile(
    conn: apsw.Connection, user_id: str, username: str | None = None, display_name: str | None = None
) -> None:
    """Create the user's profile on first contact; keep username and name current."""
    stamp = now_iso()
    with immediate(conn):
        conn.execute(UPSERT_PROFILE_SQL, (user_id, username, display_name, stamp, stamp))


def get_profile(conn: apsw.Connection, user_id: str) -> Profile | None:
    """The user's profile, or None if Ash has never seen them."""
    found = one(
        conn,
        "SELECT user_id, username, display_name, notes, preferences, timezone FROM user_profiles WHERE user_id = ?",
        (user_id,),
    )
    if not found:
        return None
    return Profile(**{**found, "preferences": json.loads(found["preferences"])})


def set_notes(conn: apsw.Connection, user_id: str, notes: str) -> None:
    """Replace the user's profile notes (the profile is created if needed)."""
    touch_profile(conn, user_id)
    with immediate(conn):
        conn.execute(
            "UPDATE user_profiles SET notes = ?, updated_at = ? WHERE user_id = ?", (notes, now_iso(), user_id)
        )


def set_timezone(conn: apsw.Connection, user_id: str, timezone: str) -> None:
    """Set the IANA time zone dates are shown in for this user (the profile is created if needed);
    ValueError for a name the time zone database does not know."""
    try:
        zoneinfo.ZoneInfo(timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {timezone!r}: use an IANA name such as Europe/Berlin or UTC") from None
    touch_profile(conn, user_id)
    with immediate(conn):
        conn.execute(
            "UPDATE user_profiles SET timezone = ?, updated_at = ? WHERE user_id = ?", (timezone, now_iso(), user_id)
        )


def audit(conn: apsw.Connection, actor: str, action: str, target: str | None = None, **detail) -> None:
    """Record that something happened (never the content of what was said)."""
    with immediate(conn):
        conn.execute(
            "INSERT INTO audit_log (created_at, actor, action, target, detail) VALUES (?, ?, ?, ?, ?)",
            (now_iso(), actor, action, target, json.dumps(detail)),
        )
