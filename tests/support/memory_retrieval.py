"""Helpers for the retrieval-engine tests: settings from a config file, turns, knowledge rows."""

from __future__ import annotations

from pathlib import Path

import apsw

from lib.config import Settings, load_settings
from lib.db import connect, now_iso
from lib.memory import store
from lib.memory.search import index
from lib.migrations import migrate


def settings_with(home: Path, config: str = "") -> Settings:
    """Write `$ASH_HOME/config.toml` with `config` and load settings from it."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(config, encoding="utf-8")
    return load_settings()


def open_db(settings: Settings) -> apsw.Connection:
    """A connection to the configured database, migrated."""
    conn = connect(settings.database_path)
    migrate(conn)
    return conn


def turn(conn: apsw.Connection, settings: Settings, user_id: str, text: str, answer: str = "Noted.") -> tuple[int, int]:
    """One recorded turn in `user_id`'s private chat, indexed the way the agent does it."""
    from lib.memory.api import record_turn

    session = store.open_session(conn, "telegram", user_id, user_id, "private")
    return record_turn(conn, settings, session_id=session.id, user_id=user_id, user_text=text, answer_text=answer)


def add_knowledge(
    conn: apsw.Connection,
    settings: Settings,
    content: str,
    owner: str | None,
    *,
    is_global: bool = False,
    expires_at: str | None = None,
) -> int:
    """Insert a knowledge row directly (the surfaces module owns the real writer) and index it."""
    with conn:
        conn.execute(
            "INSERT INTO memories (content, owner_user_id, is_global, created_at, expires_at) VALUES (?, ?, ?, ?, ?)",
            (content, owner, int(is_global), now_iso(), expires_at),
        )
        memory_id = conn.last_insert_rowid()
    index.index_memory(conn, settings, memory_id)
    return memory_id


def vector_rows(conn: apsw.Connection) -> int:
    """Rows in the vec0 table (0 when it does not exist)."""
    from lib.memory.search import vectors

    return vectors.count(conn)


def fts_count(conn: apsw.Connection, word: str) -> int:
    """FTS rows matching `word`."""
    return conn.execute("SELECT count(*) FROM search_fts WHERE search_fts MATCH ?", (word,)).fetchone()[0]
