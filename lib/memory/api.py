"""What the agent and the channels call: the memory module's public surface.

`retrieve_context` and `record_turn` are the two calls every turn makes.
"""

from __future__ import annotations

import apsw

from lib.config import Settings
from lib.memory import store
from lib.memory.types import SearchResult


def retrieve_context(
    conn: apsw.Connection,
    settings: Settings,
    *,
    user_id: str,
    query: str,
    session_id: int | None = None,
    token_budget: int | None = None,
) -> list[SearchResult]:
    """Past messages and knowledge relevant to `query` that `user_id` may see, best first,
    within `token_budget` (lowest relevance cut first). Messages already in the session's
    recent window may be excluded by the caller."""
    return []


def record_turn(
    conn: apsw.Connection,
    settings: Settings,
    *,
    session_id: int,
    user_id: str,
    user_text: str,
    answer_text: str,
    update_id: int | None = None,
) -> tuple[int, int]:
    """Persist the user's message and the answer, index both; returns their message ids."""
    with conn:
        user_msg = store.add_message(conn, session_id, user_id, "user", user_text, update_id=update_id)
        answer = store.add_message(conn, session_id, user_id, "assistant", answer_text, update_id=update_id)
    return user_msg, answer
