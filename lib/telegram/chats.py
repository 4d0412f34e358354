"""The Telegram chats Ash has seen: their type and title, whether the bot was blocked there, the
group a supergroup replaced, and the one notice a stranger gets in their private chat.

Channel state, kept apart from who may talk (lib/conversation/access.py): a 403 blocks a chat,
a group's upgrade gives it a new id, and strangers are told their id at most DENIALS_PER_MINUTE
times a minute across all of them (a flood of new accounts costs nothing).
"""

from __future__ import annotations

import time

import apsw

from lib.config import Settings
from lib.conversation.access import is_allowed
from lib.db import immediate, iso, now_iso, rows, write

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

# What admit() decides about one message.
ALLOWED, TELL_DENIED, DENIED, BLOCKED = "allowed", "tell denied", "denied", "blocked"


MARK_BLOCKED_SQL = """
INSERT INTO chats (chat_id, type, blocked_at, updated_at) VALUES (?, 'private', ?, ?)
ON CONFLICT (chat_id) DO UPDATE SET blocked_at = excluded.blocked_at, updated_at = excluded.updated_at
"""
MARK_MIGRATED_SQL = """
INSERT INTO chats (chat_id, type, migrated_to, updated_at) VALUES (?, 'group', ?, ?)
ON CONFLICT (chat_id) DO UPDATE SET migrated_to = excluded.migrated_to, updated_at = excluded.updated_at
"""


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


def admit(
    conn: apsw.Connection,
    settings: Settings,
    *,
    chat_id: int,
    chat_type: str,
    title: str | None,
    user_id: int,
    username: str | None,
) -> str:
    """The checks of one message, in one call (one hop to a database thread): whether its sender
    may talk to Ash (a stranger is told once, in their private chat: TELL_DENIED, else DENIED);
    the chat noted; in a private chat, writing means the bot is no longer blocked; a group that
    removed the bot is BLOCKED. Nothing is stored for a stranger beyond their one denial."""
    if not is_allowed(conn, settings, user_id, username):
        private = chat_type == "private"
        return TELL_DENIED if private and should_tell_denied(conn, chat_id) else DENIED
    note_chat(conn, chat_id, chat_type, title)
    if chat_type == "private":
        mark_blocked(conn, chat_id, False)
        return ALLOWED
    state = chat_state(conn, chat_id)
    return BLOCKED if state and state["blocked_at"] else ALLOWED
