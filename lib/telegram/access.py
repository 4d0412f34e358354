"""Who may talk to Ash: the config's allowed_users plus `ash users allow` rows, read on every check.

Empty means nobody (fail closed); the owner is always allowed. An @username entry is pinned
to the numeric id of the first user who writes with that name, and from then on only that id
matches it (usernames can be given up and taken by someone else).
"""

from __future__ import annotations

import time

import apsw

from lib.config import Settings
from lib.db import immediate, iso, now_iso, rows, write

DB_ENTRIES_SQL = "SELECT entry, user_id FROM allowed_users"

PIN_SQL = """
INSERT INTO allowed_users (entry, user_id, source, added_at, pinned_at) VALUES (:entry, :user_id, 'config', :now, :now)
ON CONFLICT (entry) DO UPDATE SET user_id = :user_id, pinned_at = :now WHERE allowed_users.user_id IS NULL
"""

ALLOW_SQL = """
INSERT INTO allowed_users (entry, user_id, source, added_at) VALUES (?, ?, ?, ?)
ON CONFLICT (entry) DO NOTHING
"""

UPSERT_CHAT_SQL = """
INSERT INTO chats (chat_id, type, title, updated_at) VALUES (?, ?, ?, ?)
ON CONFLICT (chat_id) DO UPDATE SET type = excluded.type, title = coalesce(excluded.title, title),
    updated_at = excluded.updated_at
"""

# A stranger's private chat gets one row, made by their one denial and holding nothing else.
DENIED_NOTICE_SQL = """
INSERT INTO chats (chat_id, type, denied_notice_at, updated_at) VALUES (:chat, 'private', :now, :now)
ON CONFLICT (chat_id) DO UPDATE SET denied_notice_at = :now WHERE chats.denied_notice_at IS NULL
"""
RECENT_DENIALS_SQL = "SELECT count(*) FROM chats WHERE denied_notice_at >= ?"
# Denials sent to all strangers together in one minute, at most: beyond it they are told later.
DENIALS_PER_MINUTE = 20


def normalize_entry(entry: str | int) -> str:
    """A numeric id as digits, a username as lower-case @name."""
    text = str(entry).strip()
    if text.lstrip("-").isdigit():
        return str(int(text))
    return "@" + text.lstrip("@").lower()


def is_allowed(conn: apsw.Connection, settings: Settings, user_id: int, username: str | None) -> bool:
    """True when the user may talk to Ash; pins a matching @username entry to this id first time."""
    uid = str(user_id)
    if settings.config.owner is not None and str(settings.config.owner) == uid:
        return True
    pinned: dict[str, str | None] = {row["entry"]: row["user_id"] for row in rows(conn, DB_ENTRIES_SQL)}
    entries = {normalize_entry(e) for e in settings.config.telegram.allowed_users} | set(pinned)
    if uid in entries or uid in {v for v in pinned.values() if v}:
        return True
    if not username:
        return False
    name = "@" + username.lower()
    if name not in entries:
        return False
    owner = pinned.get(name)
    if owner:
        return owner == uid
    with immediate(conn):
        conn.execute(PIN_SQL, {"entry": name, "user_id": uid, "now": now_iso()})
        # Someone else may have pinned it a moment earlier; the row decides.
        row = rows(conn, "SELECT user_id FROM allowed_users WHERE entry = ?", (name,))
    return bool(row) and row[0]["user_id"] == uid


MARK_BLOCKED_SQL = """
INSERT INTO chats (chat_id, type, blocked_at, updated_at) VALUES (?, 'private', ?, ?)
ON CONFLICT (chat_id) DO UPDATE SET blocked_at = excluded.blocked_at, updated_at = excluded.updated_at
"""
MARK_MIGRATED_SQL = """
INSERT INTO chats (chat_id, type, migrated_to, updated_at) VALUES (?, 'group', ?, ?)
ON CONFLICT (chat_id) DO UPDATE SET migrated_to = excluded.migrated_to, updated_at = excluded.updated_at
"""


def allow(conn: apsw.Connection, entry: str, source: str = "cli") -> tuple[str, bool]:
    """Add an allowed user (numeric id or @username); returns (entry, newly added)."""
    key = normalize_entry(entry)
    user_id = key if not key.startswith("@") else None
    return key, write(conn, ALLOW_SQL, (key, user_id, source, now_iso())) > 0


def listing(conn: apsw.Connection, settings: Settings) -> list[dict]:
    """Every allowed entry with where it comes from and the id it is pinned to."""
    found = {
        row["entry"]: row
        for row in rows(conn, "SELECT entry, user_id, source, added_at, pinned_at FROM allowed_users ORDER BY added_at")
    }
    for entry in settings.config.telegram.allowed_users:
        key = normalize_entry(entry)
        found.setdefault(
            key,
            {
                "entry": key,
                "user_id": None if key.startswith("@") else key,
                "source": "config",
                "added_at": None,
                "pinned_at": None,
            },
        )
    return list(found.values())


def note_chat(conn: apsw.Connection, chat_id: int, chat_type: str, title: str | None) -> None:
    """Remember a chat Ash has seen."""
    write(conn, UPSERT_CHAT_SQL, (str(chat_id), chat_type, title, now_iso()))


def should_tell_denied(conn: apsw.Connection, chat_id: int, per_minute: int = DENIALS_PER_MINUTE) -> bool:
    """True once per private chat, the first time someone not allowed writes there, unless
    `per_minute` strangers were already told in the last minute (then nothing is stored)."""
    with immediate(conn):
        if conn.execute(RECENT_DENIALS_SQL, (iso(time.time() - 60),)).fetchone()[0] >= per_minute:
            return False
        conn.execute(DENIED_NOTICE_SQL, {"chat": str(chat_id), "now": now_iso()})
        return conn.changes() > 0


def chat_state(conn: apsw.Connection, chat_id: int | str) -> dict | None:
    """The chat's row (blocked_at, migrated_to, ...), or None."""
    found = rows(conn, "SELECT * FROM chats WHERE chat_id = ?", (str(chat_id),))
    return found[0] if found else None


def mark_blocked(conn: apsw.Connection, chat_id: int | str, blocked: bool = True) -> None:
    """The user blocked the bot (403) or unblocked it: stop or resume writing there."""
    write(conn, MARK_BLOCKED_SQL, (str(chat_id), now_iso() if blocked else None, now_iso()))


def mark_migrated(conn: apsw.Connection, chat_id: int | str, new_chat_id: int | str) -> None:
    """A group became a supergroup with a new id."""
    write(conn, MARK_MIGRATED_SQL, (str(chat_id), str(new_chat_id), now_iso()))
