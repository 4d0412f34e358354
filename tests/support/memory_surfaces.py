"""Helpers for the memory-surfaces tests: settings from a config file, a migrated database, turns."""

from __future__ import annotations

from pathlib import Path

import apsw

from lib.config import Settings
from lib.memory import store
from tests.support.memory_retrieval import settings_with

NO_EMBEDDINGS = '[embeddings]\nprovider = "none"\n'
LOCAL_EMBEDDINGS = '[embeddings]\nprovider = "local"\n'


def make_settings(home: Path, extra: str = NO_EMBEDDINGS) -> Settings:
    """Write `$ASH_HOME/config.toml` (owner 1001 plus `extra`) and load settings from it."""
    return settings_with(home, "owner = 1001\n" + extra)


def say(
    conn: apsw.Connection,
    settings: Settings,
    user_id: str,
    text: str,
    answer: str = "Noted.",
    *,
    chat_id: str | None = None,
    chat_type: str = "private",
) -> tuple[int, int]:
    """One recorded turn of `user_id` in a chat (their private chat by default), indexed."""
    from lib.memory.search import index

    session = store.open_session(conn, "telegram", chat_id or user_id, user_id, chat_type)
    user_msg = store.add_message(conn, session.id, user_id, "user", text)
    answer_msg = store.add_message(conn, session.id, user_id, "assistant", answer)
    index.index_messages(conn, settings, [user_msg, answer_msg])
    return user_msg, answer_msg


def chunk_texts(conn: apsw.Connection) -> str:
    """Every indexed chunk's text, joined."""
    return "\n".join(r[0] for r in conn.execute("SELECT content FROM search_chunks"))
