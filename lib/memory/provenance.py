"""What each answer drew on: the retrieved entries and messages, and the profile note lines, that
entered its prompt, and what the model's `recall` calls found, with their scores (what `/why`
and the 🧠 button show).

Recorded when the prompt is built (lib/agent/turn.py), linked to the stored answer once it is
stored and to the channel's message ids once they are known, so "the answer I reply to" and "the
last answer" can both be found. Only ids and scores are kept: a note line is named by the
sha256 of its text, which stays in the profile alone.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import apsw

from lib.db import immediate, now_iso, one, rows
from lib.memory.types import SearchResult

INSERT_ANSWER_SQL = """
INSERT INTO answer_sources (provider, chat_id, user_id, memory_owner, session_id, update_id, created_at)
VALUES (:provider, :chat_id, :user_id, :owner, :session_id, :update_id, :now)
"""
INSERT_ITEM_SQL = """
INSERT INTO answer_source_items (answer_id, kind, ref_id, note_hash, score, rank)
VALUES (:answer, :kind, :ref_id, :note_hash, :score, :rank)
"""
COLUMNS = """id, provider, chat_id, user_id, memory_owner, session_id, update_id, answer_message_id,
reply_message_ids, created_at"""
# The answer shown in a message someone replies to with /why (any of its parts).
BY_REPLY_SQL = f"""
SELECT {COLUMNS} FROM answer_sources
WHERE provider = :provider AND chat_id = :chat_id
  AND EXISTS (SELECT 1 FROM json_each(answer_sources.reply_message_ids) WHERE value = :message_id)
ORDER BY id DESC LIMIT 1
"""
LAST_SQL = f"""
SELECT {COLUMNS} FROM answer_sources
WHERE provider = :provider AND chat_id = :chat_id AND user_id = :user_id AND answer_message_id IS NOT NULL
ORDER BY id DESC LIMIT 1
"""
ITEMS_SQL = "SELECT id, kind, ref_id, note_hash, score, rank FROM answer_source_items WHERE answer_id = ? ORDER BY rank"


@dataclass(frozen=True)
class Source:
    """One thing an answer drew on: a knowledge entry, a past message, or a line of profile notes."""

    id: int
    kind: str  # knowledge | message | note
    ref_id: int | None
    note_hash: str | None
    score: float | None
    rank: int


@dataclass(frozen=True)
class Answer:
    """An answer whose prompt was recorded: who asked, whose memory it read, where it is shown."""

    id: int
    provider: str
    chat_id: str
    user_id: str
    memory_owner: str
    session_id: int | None
    update_id: int | None
    answer_message_id: int | None
    reply_message_ids: list[int]
    created_at: str


def _answer(row: dict) -> Answer:
    return Answer(**{**row, "reply_message_ids": json.loads(row["reply_message_ids"])})


def note_lines(notes: str) -> list[str]:
    """The profile notes' lines as a prompt shows them, one fact each."""
    return [line.strip() for line in notes.splitlines() if line.strip()]


def note_hash(line: str) -> str:
    """The name a note line is recorded under (its text is not kept here)."""
    return hashlib.sha256(" ".join(line.split()).encode()).hexdigest()


def record(
    conn: apsw.Connection,
    *,
    provider: str,
    chat_id: str,
    user_id: str,
    memory_owner: str,
    session_id: int | None,
    update_id: int | None,
    retrieved: list[SearchResult],
    notes: str,
) -> int:
    """Record what a prompt holds: `retrieved` (as it entered the prompt, best first) and the
    lines of `notes`; returns the answer's id. A resumed turn replaces its earlier record."""
    with immediate(conn):
        if update_id is not None:
            conn.execute(
                "DELETE FROM answer_sources WHERE provider = ? AND chat_id = ? AND update_id = ?",
                (provider, chat_id, update_id),
            )
        conn.execute(
            INSERT_ANSWER_SQL,
            {
                "provider": provider,
                "chat_id": chat_id,
                "user_id": user_id,
                "owner": memory_owner,
                "session_id": session_id,
                "update_id": update_id,
                "now": now_iso(),
            },
        )
        answer_id = conn.last_insert_rowid()
        items = [(r.source_type, r.id, None, r.score) for r in retrieved]
        items += [("note", None, note_hash(line), None) for line in note_lines(notes)]
        for rank, (kind, ref_id, hashed, score) in enumerate(items):
            conn.execute(
                INSERT_ITEM_SQL,
                {
                    "answer": answer_id,
                    "kind": kind,
                    "ref_id": ref_id,
                    "note_hash": hashed,
                    "score": score,
                    "rank": rank,
                },
            )
    return answer_id


def add_found(conn: apsw.Connection, answer_id: int, found: list[tuple[str, int, float | None]]) -> int:
    """Add what a `recall` call showed the model ((kind, id, score) of each entry or message) after
    the prompt's items, each once; returns how many items the answer now drew on."""
    with immediate(conn):
        recorded = rows(conn, ITEMS_SQL, (answer_id,))
        held = {(r["kind"], r["ref_id"]) for r in recorded}
        rank = len(recorded)
        for kind, ref_id, score in found:
            if (kind, ref_id) in held:
                continue
            held.add((kind, ref_id))
            params = {"answer": answer_id, "kind": kind, "ref_id": ref_id, "note_hash": None, "score": score}
            conn.execute(INSERT_ITEM_SQL, {**params, "rank": rank})
            rank += 1
    return rank


def attach_answer(conn: apsw.Connection, answer_id: int, message_id: int) -> None:
    """Link the record to the stored answer (messages.id)."""
    with immediate(conn):
        conn.execute("UPDATE answer_sources SET answer_message_id = ? WHERE id = ?", (message_id, answer_id))


def attach_replies(conn: apsw.Connection, answer_id: int, message_ids: list[int]) -> None:
    """Link the record to the channel's messages that show the answer (Telegram message ids)."""
    with immediate(conn):
        conn.execute(
            "UPDATE answer_sources SET reply_message_ids = ? WHERE id = ?", (json.dumps(message_ids), answer_id)
        )


def get(conn: apsw.Connection, answer_id: int) -> Answer | None:
    """One recorded answer, or None."""
    found = one(conn, f"SELECT {COLUMNS} FROM answer_sources WHERE id = ?", (answer_id,))
    return _answer(found) if found else None


def find(
    conn: apsw.Connection, *, provider: str, chat_id: str, user_id: str, reply_to: int | None = None
) -> Answer | None:
    """The answer shown in message `reply_to` of the chat, or else the asker's last answer there."""
    if reply_to is not None:
        found = one(conn, BY_REPLY_SQL, {"provider": provider, "chat_id": chat_id, "message_id": reply_to})
        return _answer(found) if found else None
    found = one(conn, LAST_SQL, {"provider": provider, "chat_id": chat_id, "user_id": user_id})
    return _answer(found) if found else None


def sources(conn: apsw.Connection, answer_id: int) -> list[Source]:
    """What the answer drew on, in prompt order."""
    return [Source(**r) for r in rows(conn, ITEMS_SQL, (answer_id,))]


def source(conn: apsw.Connection, item_id: int) -> tuple[Source, Answer] | None:
    """One item and the answer it belongs to, or None."""
    found = one(
        conn,
        "SELECT answer_id, id, kind, ref_id, note_hash, score, rank FROM answer_source_items WHERE id = ?",
        (item_id,),
    )
    if found is None:
        return None
    answer = get(conn, found.pop("answer_id"))
    return (Source(**found), answer) if answer is not None else None
