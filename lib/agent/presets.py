"""Which model answers in a chat: the `[models.NAME]` preset it picked with /model, else [default_llm].

A chat's pick is stored by (provider, chat id), so it survives restarts. A pick whose preset was
since removed from config.toml is not an error: [default_llm] answers (and the log says why)
until the chat picks again or the preset comes back.
"""

from __future__ import annotations

import logging

import apsw

from lib.config import Settings
from lib.db import immediate, now_iso, one, write

log = logging.getLogger("ash.agent")

PICKED_SQL = "SELECT preset FROM chat_models WHERE provider = ? AND chat_id = ?"
PICK_SQL = """
INSERT INTO chat_models (provider, chat_id, preset, updated_at) VALUES (?, ?, ?, ?)
ON CONFLICT (provider, chat_id) DO UPDATE SET preset = excluded.preset, updated_at = excluded.updated_at
"""
UNPICK_SQL = "DELETE FROM chat_models WHERE provider = ? AND chat_id = ?"


def picked_preset(conn: apsw.Connection, provider: str, chat_id: str) -> str | None:
    """The preset the chat last picked, whether or not the config still has it (None: the default)."""
    row = one(conn, PICKED_SQL, (provider, chat_id))
    return row["preset"] if row else None


def chat_preset(conn: apsw.Connection, settings: Settings, provider: str, chat_id: str) -> str | None:
    """The configured preset that answers in this chat; None means [default_llm]."""
    picked = picked_preset(conn, provider, chat_id)
    if picked is None or picked in settings.config.models:
        return picked
    log.warning(
        "chat %s:%s picked the model preset %r, which config.toml no longer has; [default_llm] answers",
        provider,
        chat_id,
        picked,
    )
    return None


def pick_preset(conn: apsw.Connection, provider: str, chat_id: str, preset: str | None) -> None:
    """Make `preset` this chat's model from its next turn on (None: back to [default_llm])."""
    if preset is None:
        write(conn, UNPICK_SQL, (provider, chat_id))
    else:
        write(conn, PICK_SQL, (provider, chat_id, preset, now_iso()))


# The new id keeps its own pick if it made one already; otherwise it takes the old id's.
MOVE_PICK_SQL = """
INSERT OR IGNORE INTO chat_models (provider, chat_id, preset, updated_at)
SELECT provider, :new, preset, updated_at FROM chat_models WHERE provider = :provider AND chat_id = :old
"""


def move_pick(conn: apsw.Connection, provider: str, old_chat_id: str, new_chat_id: str) -> None:
    """A chat's /model pick under its new id (a group upgraded to a supergroup)."""
    params = {"provider": provider, "old": old_chat_id, "new": new_chat_id}
    with immediate(conn):
        conn.execute(MOVE_PICK_SQL, params)
        conn.execute(UNPICK_SQL, (provider, old_chat_id))
