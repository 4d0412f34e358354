"""What the agent and the channels call: the memory module's public surface.

`retrieve_context` and `record_turn` are the two calls every turn makes. Searching and the
index are memory's own business (lib/memory/search/, which nothing outside lib.memory imports:
the `memory-search-inside` contract); the few calls others need of them are named here:
searches for the operator's surfaces, the tools and MCP; the index's state and rebuild for
`ash memory` and `ash doctor`; the embedder for `ash doctor`; how a transcript names a speaker;
and closing the side connections of hybrid searches before a database file goes away.
"""

from __future__ import annotations

from typing import NamedTuple

import apsw

from lib.config import Settings
from lib.db import immediate
from lib.memory import reinforce, store
from lib.memory.extraction import enqueue as enqueue_extraction
from lib.memory.search.chunking import speaker
from lib.memory.search.embeddings import get_embedder
from lib.memory.search.excerpt import shortened
from lib.memory.search.index import index_messages, index_status, reindex_all
from lib.memory.search.parallel import close_side_connections
from lib.memory.search.retrieval import search_all, search_knowledge, search_messages
from lib.memory.standing import standing_instructions
from lib.memory.types import SearchResult
from lib.tokens import estimate_tokens

__all__ = [
    "Retrieved",
    "close_side_connections",
    "get_embedder",
    "index_status",
    "recall",
    "record_turn",
    "reindex_all",
    "retrieve_context",
    "retrieve_for_prompt",
    "search_all",
    "search_knowledge",
    "search_messages",
    "shown_whole",
    "speaker",
]

# Items fetched before the token budget is applied.
RETRIEVAL_CANDIDATES = 20
# The exchange an earlier run of the same update already stored (user message, its answer).
RECORDED_SQL = """
SELECT u.id, a.id FROM messages u JOIN messages a
    ON a.session_id = u.session_id AND a.update_id = u.update_id AND a.role = 'assistant'
WHERE u.session_id = ? AND u.update_id = ? AND u.role = 'user'
ORDER BY u.id LIMIT 1
"""
REPLACE_ANSWER_SQL = "UPDATE messages SET content = ?, token_count = ? WHERE id = ?"
PREVIOUS_MESSAGE_SQL = """
SELECT id FROM messages WHERE session_id = ? AND id < ? AND role IN ('user', 'assistant') ORDER BY id DESC LIMIT 1
"""


class Retrieved(NamedTuple):
    """What reaches a prompt, and whether more passed the floor than it holds (cut by the number
    of items or the token budget): the prompt then says `recall` finds more."""

    items: list[SearchResult]
    more: bool


def retrieve_context(
    conn: apsw.Connection,
    settings: Settings,
    *,
    user_id: str,
    query: str,
    token_budget: int | None = None,
) -> list[SearchResult]:
    """Past messages and knowledge relevant to `query` that `user_id` (a memory owner: a
    person, or a group, see lib/memory/scope.py) may see, best first, only what passes the
    relevance floor (lib/memory/search/relevance.py: small talk pulls in nothing), within
    `token_budget` (lowest relevance cut first), after the person's standing instructions
    (metadata "standing", lib/memory/standing.py), which come whatever the query and take at
    most half the budget. Messages already in the session's recent window may be excluded by
    the caller (lib/agent/turn.py does)."""
    return retrieve_for_prompt(conn, settings, user_id=user_id, query=query, token_budget=token_budget).items


def retrieve_for_prompt(
    conn: apsw.Connection, settings: Settings, *, user_id: str, query: str, token_budget: int | None = None
) -> Retrieved:
    """retrieve_context's items, and whether memory holds more that passed the floor."""
    budget = settings.config.memory.retrieval_token_budget if token_budget is None else token_budget
    if budget <= 0:
        return Retrieved([], False)
    found: list[SearchResult] = []
    if query.strip():
        # One past the limit: whether more than the prompt can hold passed the floor.
        found = search_all(conn, settings, user_id=user_id, query=query, limit=RETRIEVAL_CANDIDATES + 1, floor=True)
        more = len(found) > RETRIEVAL_CANDIDATES
        # A long message goes in as its part that matches (lib/memory/search/excerpt.py).
        found = [shortened(result, query) for result in found[:RETRIEVAL_CANDIDATES]]
    else:
        more = False
    # The person's standing instructions come first, whatever the message (a photo without a
    # caption too: lib/memory/standing.py).
    standing = standing_instructions(conn, user_id)
    given = {r.id for r in standing}
    found = standing + [r for r in found if not (r.source_type == "message" and r.id in given)]
    kept: list[SearchResult] = []
    spent = 0
    # Best first: whatever does not fit is the least relevant, so it is what gets cut. Standing
    # instructions, first of all, take at most half: what the question retrieves keeps the rest.
    for result in found:
        cost = result.token_count or estimate_tokens(result.content)
        if spent + cost > (budget // 2 if result.metadata.get("standing") else budget):
            more = more or not result.metadata.get("standing")
            continue
        kept.append(result)
        spent += cost
    # Being retrieved counts as use: extracted facts that keep coming up do not decay.
    used = [r.id for r in kept if r.source_type == "knowledge" and r.metadata.get("source") == "extraction"]
    reinforce.touch(conn, used)
    return Retrieved(kept, more)


def shown_whole(items: list[SearchResult]) -> list[int]:
    """The past messages among a prompt's items that it shows whole: a long one goes in as its
    matching part (lib/memory/search/excerpt.py), which `recall` may still show whole."""
    return [r.id for r in items if r.source_type == "message" and not r.metadata.get("excerpt")]


def recall(
    conn: apsw.Connection,
    settings: Settings,
    *,
    user_id: str,
    query: str,
    limit: int,
    seen: frozenset[int] = frozenset(),
) -> tuple[list[SearchResult], int]:
    """The agent's own search (the `recall` tool): the best `limit` entries for `query`, leaving
    out the past messages in `seen` (those the model already reads this turn: the prompt's
    memory section, the conversation window, earlier recall calls), so each call brings new
    evidence rather than the prompt's items again. Returns them and how many seen messages
    were left out. Knowledge entries always come back: they are short, and `forget` needs
    their ids, which the prompt does not show."""
    found = search_all(conn, settings, user_id=user_id, query=query, limit=limit + len(seen))
    fresh = [r for r in found if not (r.source_type == "message" and r.id in seen)]
    return fresh[:limit], len(found) - len(fresh)


def record_turn(
    conn: apsw.Connection,
    settings: Settings,
    *,
    session_id: int,
    user_id: str,
    user_text: str,
    answer_text: str,
    update_id: int | None = None,
    embed: bool = True,
    owner: str | None = None,
    speaker: str | None = None,
    origin: dict | None = None,
) -> tuple[int, int]:
    """Persist the user's message and the answer, index both; returns their message ids.

    `user_id` wrote the message; `owner` is whose memory the exchange joins (default: the
    writer's own; a group's in a group, see lib/memory/scope.py), and `speaker` the writer's
    name, kept so a shared transcript says who said what. `origin` ({store.ORIGIN_OUTSIDE: names,
    store.ORIGIN_TYPED: text}) marks a message that holds someone else's words.

    A turn resumed after a crash may be recorded twice for one update: the second time the
    stored answer is replaced rather than the exchange duplicated. With `embed=False` only the
    full-text index is written now; `lib.memory.search.index.backfill_vectors` adds the vectors."""
    owner = owner or user_id
    # Who wrote it is the speaker_user_id column; the name is kept for the transcript.
    said = {**({"speaker": speaker} if speaker else {}), **(origin or {})} or None
    # It reads before it writes: take the write lock first, or another process's commit in
    # between makes SQLite answer "database is locked" at once (lib.db.immediate).
    with immediate(conn):
        recorded = conn.execute(RECORDED_SQL, (session_id, update_id)).fetchone() if update_id is not None else None
        if recorded:
            user_msg, answer = recorded
            conn.execute(REPLACE_ANSWER_SQL, (answer_text, estimate_tokens(answer_text), answer))
        else:
            user_msg = store.add_message(
                conn,
                session_id,
                owner,
                "user",
                user_text,
                update_id=update_id,
                metadata=said,
                speaker_user_id=user_id,
            )
            answer = store.add_message(conn, session_id, owner, "assistant", answer_text, update_id=update_id)
    # After the commit: the turn is safe even if indexing is slow; embeddings degrade on their own.
    # The session's previous message is reindexed too: its chunk now gains this turn as context.
    previous = conn.execute(PREVIOUS_MESSAGE_SQL, (session_id, user_msg)).fetchone()
    index_messages(conn, settings, [*(previous or ()), user_msg, answer], embed=embed)
    if recorded:
        return user_msg, answer
    # Fact extraction runs later, debounced per user (lib/memory/extraction.py). It writes facts
    # about one person into their own memory, so it reads only their own chats: a group's words
    # stay in the group's transcript, searchable there.
    if owner == user_id and len(user_text) >= settings.config.memory.extraction_min_message_length:
        enqueue_extraction(conn, settings, user_id, user_msg)
    return user_msg, answer
