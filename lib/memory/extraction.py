"""Fact extraction: durable facts about a person, pulled from their messages by the model.

After a turn the user is queued (`enqueue`); the first message after a quiet spell makes the
extraction due `extraction_debounce_seconds` later and later messages join it, so a chatty
user costs at most one extraction call per debounce period. When due (`run_due`) the model
reads the new messages and answers JSON facts with a confidence; those at or above
`extraction_confidence_threshold` become knowledge (source "extraction", linked to the
message they came from) and lines of the profile notes. A fact that updates or contradicts
an older one supersedes it: candidates are found by similarity (hybrid search and the same
subject), then the model decides which of them the new fact replaces.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import apsw

from lib.config import Settings
from lib.db import Database, immediate, one, rows
from lib.memory import knowledge, reinforce, review, screen, store
from lib.memory.facts import Fact, parse_facts, parse_superseded
from lib.memory.forget import EXTRACTION_CURSOR_KEY

log = logging.getLogger("ash.memory.extraction")

# complete(system=..., prompt=..., user_id=...) -> the model's text answer.
Complete = Callable[..., Awaitable[str]]

# Who the audit log names for facts Ash extracted; the message each came from is in its detail.
EXTRACTION_ACTOR = "extraction"
MAX_MESSAGES_PER_RUN = 50
MAX_CANDIDATES = 8

ENQUEUE_SQL = """
INSERT INTO extraction_queue (user_id, due_at, through_message_id) VALUES (?, ?, ?)
ON CONFLICT (user_id) DO UPDATE SET through_message_id = max(through_message_id, excluded.through_message_id)
"""
DUE_SQL = "SELECT user_id, due_at, through_message_id FROM extraction_queue WHERE due_at <= ? ORDER BY due_at"
NEW_MESSAGES_SQL = """
SELECT id, content, created_at, metadata FROM messages
WHERE owner_user_id = :user AND role = 'user' AND id > :after AND id <= :through AND length(content) >= :min_length
ORDER BY id DESC LIMIT :limit
"""
# Done through `through`; a row that grew meanwhile stays queued for the newer messages.
DEQUEUE_SQL = "DELETE FROM extraction_queue WHERE user_id = ? AND through_message_id <= ?"
RESCHEDULE_SQL = "UPDATE extraction_queue SET due_at = ? WHERE user_id = ?"
SET_CURSOR_SQL = "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"

EXTRACT_SYSTEM = """You maintain the long-term memory of a personal assistant.
Read the user's messages and list durable facts about the user worth remembering in later
conversations: identity, home, work, family, plans with dates, preferences, habits, ongoing
projects. Skip small talk, questions, one-off requests and anything about other people
that is not about their relation to the user. Write each fact as a short third-person
sentence about "the user". Rate how sure you are that it is true and lasting (0 to 1).
Answer only JSON, no prose:
{"facts": [{"content": "The user lives in Lisbon.", "subject": "home city",
"confidence": 0.9, "message_id": 123}]}
Use {"facts": []} when there is nothing durable."""

CHECK_SYSTEM = """You keep a personal assistant's memory consistent.
Given a new fact about the user and older facts, list the ids of older facts that the new
fact updates, corrects or contradicts (they are no longer true once the new one is). Facts
that are merely related, or still true alongside the new one, are not listed.
Answer only JSON, no prose: {"supersedes": [12, 15]} or {"supersedes": []}."""


@dataclass
class Report:
    """What one user's extraction did."""

    user_id: str
    messages: int = 0
    stored: list[int] = field(default_factory=list)
    dropped: int = 0
    superseded: dict[int, int] = field(default_factory=dict)  # old id -> new id
    # Facts that were already known: the entry saying them was reinforced, not copied.
    reinforced: list[int] = field(default_factory=list)
    error: str | None = None


def enqueue(
    conn: apsw.Connection, settings: Settings, user_id: str, message_id: int, *, now: float | None = None
) -> bool:
    """Queue the user for extraction through `message_id`; False when extraction is off."""
    memory = settings.config.memory
    if not memory.extraction_enabled:
        return False
    due = (time.time() if now is None else now) + memory.extraction_debounce_seconds
    with immediate(conn):
        conn.execute(ENQUEUE_SQL, (user_id, due, message_id))
    return True


def _cursor(conn: apsw.Connection, user_id: str) -> int:
    found = one(conn, "SELECT value FROM meta WHERE key = ?", (EXTRACTION_CURSOR_KEY.format(user_id=user_id),))
    return int(found["value"]) if found else 0


def _load_batch(conn: apsw.Connection, settings: Settings, user_id: str, through: int) -> tuple[list[dict], list[str]]:
    """The messages extraction reads, and the outside content any message of the batch held."""
    params = {
        "user": user_id,
        "after": _cursor(conn, user_id),
        "through": through,
        "min_length": settings.config.memory.extraction_min_message_length,
        "limit": MAX_MESSAGES_PER_RUN,
    }
    messages, outside = [], []
    for message in reversed(rows(conn, NEW_MESSAGES_SQL, params)):
        own = _own_part(message)
        outside += own["outside"]
        if own["content"]:
            messages.append(own)
    return messages, outside


def _own_part(message: dict) -> dict:
    """The message as extraction reads it: of one that held someone else's words (a forward, a
    quoted message, a document: store.ORIGIN_OUTSIDE), only what the person typed ("" when they
    typed nothing). A forwarded "the user's password is ..." is not a fact the user told Ash.
    `outside` names what the message's turn held from outside (its own parts, and tool output
    such as a web page: store.HELD_OUTSIDE): facts from it wait for review (lib/memory/review.py)."""
    metadata = json.loads(message.pop("metadata") or "{}")
    outside = [*(metadata.get(store.ORIGIN_OUTSIDE) or ()), *(metadata.get(store.HELD_OUTSIDE) or ())]
    if store.ORIGIN_OUTSIDE not in metadata:
        return {**message, "outside": outside}
    typed = str(metadata.get(store.ORIGIN_TYPED) or "").strip()
    return {**message, "content": typed, "outside": outside}


def extracted_through(conn: apsw.Connection, user_id: str) -> int:
    """The id of the newest message of `user_id` extraction has read (0: none yet)."""
    return _cursor(conn, user_id)


def _finish(conn: apsw.Connection, user_id: str, through: int) -> None:
    with immediate(conn):
        conn.execute(SET_CURSOR_SQL, (EXTRACTION_CURSOR_KEY.format(user_id=user_id), str(through)))
        conn.execute(DEQUEUE_SQL, (user_id, through))


def _candidates(conn: apsw.Connection, settings: Settings, user_id: str, fact: Fact) -> list[knowledge.Knowledge]:
    """The user's active entries most like `fact`: hybrid search hits and same-subject entries."""
    from lib.memory.search import retrieval

    found: dict[int, knowledge.Knowledge] = {}
    for result in retrieval.search_knowledge(conn, settings, user_id=user_id, query=fact.content, limit=5):
        entry = knowledge.get(conn, result.id)
        if entry and entry.owner_user_id == user_id and entry.active:
            found[entry.id] = entry
    if fact.subject:
        for entry in knowledge.active_facts(conn, user_id):
            if entry.subject and entry.subject.casefold() == fact.subject.casefold():
                found.setdefault(entry.id, entry)
    return list(found.values())[:MAX_CANDIDATES]


def _extract_prompt(messages: list[dict], known: list[knowledge.Knowledge]) -> str:
    lines = ["Facts already known (do not repeat them unless they changed):"]
    lines += [f"- {k.content}" for k in known[-30:]] or ["- (none)"]
    lines.append("\nNew messages from the user:")
    lines += [f"[message_id {m['id']}, {m['created_at'][:10]}] {m['content']}" for m in messages]
    return "\n".join(lines)


def _check_prompt(fact: Fact, candidates: list[knowledge.Knowledge]) -> str:
    older = "\n".join(f"[{c.id}] {c.content} (recorded {c.created_at[:10]})" for c in candidates)
    return f"New fact: {fact.content}\n\nOlder facts:\n{older}"


def _update_notes(conn: apsw.Connection, user_id: str, added: list[str], removed: list[str]) -> None:
    """Append new facts as note lines and drop the lines of facts they superseded."""
    profile = store.get_profile(conn, user_id)
    lines = profile.notes.splitlines() if profile else []
    gone = {f"- {text}".casefold() for text in removed}
    lines = [line for line in lines if line.strip().casefold() not in gone]
    lines += [f"- {text}" for text in added if f"- {text}".casefold() not in {x.casefold() for x in lines}]
    store.set_notes(conn, user_id, "\n".join(lines).strip())


async def _sift(
    db: Database,
    settings: Settings,
    user_id: str,
    facts: list[Fact],
    messages: list[dict],
    known: list[knowledge.Knowledge],
    report: Report,
    outside: list[str],
) -> list[Fact]:
    """The facts worth storing: confident enough, not stored already (a fact known in other words
    reinforces the stored one instead), each once, tied to a message of this batch."""
    memory = settings.config.memory
    known_texts = {k.content.casefold() for k in known}
    message_ids = {m["id"] for m in messages}
    kept = []
    for fact in facts:
        if fact.confidence < memory.extraction_confidence_threshold:
            report.dropped += 1
            continue
        # Known already (the same words, or nearly): strengthen what is stored instead of copying it.
        again = await asyncio.to_thread(lambda fact=fact: reinforce.find_duplicate(db.conn(), user_id, fact.content))
        if again is not None:
            await asyncio.to_thread(
                lambda again=again, fact=fact: reinforce.reinforce(
                    db.conn(), settings, again, actor=EXTRACTION_ACTOR, because={"source_message_id": fact.message_id}
                )
            )
            report.reinforced.append(again)
            continue
        if fact.content.casefold() in known_texts:  # twice in this run
            report.dropped += 1
            continue
        known_texts.add(fact.content.casefold())
        if fact.message_id not in message_ids:
            # Not tied to a message it read: it may come from any of them, outside content too.
            fact.message_id, fact.outside = messages[-1]["id"], list(outside)
        else:
            said = next(m for m in messages if m["id"] == fact.message_id)
            # The person's own words make it their fact, whatever else their turn held.
            fact.outside = [] if review.in_own_words(fact.content, said["content"]) else said["outside"]
        kept.append(fact)
    return kept


async def _store(
    db: Database, settings: Settings, user_id: str, fact: Fact, complete: Complete, report: Report
) -> None:
    """Store one fact, superseding the entries the model says it contradicts, and note it in the
    person's profile notes. A fact from a turn with outside content is stored pending instead:
    it replaces nothing and joins no notes until its owner keeps it (lib/memory/review.py)."""
    if fact.outside:
        await asyncio.to_thread(lambda: _store_pending(db.conn(), settings, user_id, fact, report))
        return
    candidates = await asyncio.to_thread(lambda: _candidates(db.conn(), settings, user_id, fact))
    replaced: list[int] = []
    if candidates:
        try:
            verdict = await complete(system=CHECK_SYSTEM, prompt=_check_prompt(fact, candidates), user_id=user_id)
            replaced = parse_superseded(verdict, {c.id for c in candidates})
        except Exception as exc:
            # Without a verdict both facts stay active; a later run can still settle it.
            log.warning("supersession check for user %s failed: %s", user_id, exc)
    removed = [c.content for c in candidates if c.id in replaced]

    def store_fact() -> int:
        conn = db.conn()
        with immediate(conn):
            new_id = _add_fact(conn, settings, user_id, fact)
            for old_id in replaced:
                knowledge.supersede(conn, old_id, new_id, actor=EXTRACTION_ACTOR, source_message_id=fact.message_id)
            _update_notes(conn, user_id, [fact.content], removed)
        return new_id

    try:
        new_id = await asyncio.to_thread(store_fact)
    except screen.Refused:
        report.dropped += 1  # a secret: never stored (lib/memory/screen.py)
        return
    report.stored.append(new_id)
    report.superseded.update(dict.fromkeys(replaced, new_id))


def _add_fact(conn: apsw.Connection, settings: Settings, user_id: str, fact: Fact, **where: str) -> int:
    """Store an extracted fact as knowledge (`where`: its origin and status when not the defaults)."""
    return knowledge.add(
        conn,
        settings,
        fact.content,
        owner_user_id=user_id,
        subject=fact.subject,
        confidence=fact.confidence,
        source="extraction",
        source_message_id=fact.message_id,
        actor=EXTRACTION_ACTOR,
        **where,
    )


def _store_pending(conn: apsw.Connection, settings: Settings, user_id: str, fact: Fact, report: Report) -> None:
    try:
        new_id = _add_fact(conn, settings, user_id, fact, origin=review.origin_of(fact.outside), status="pending")
    except screen.Refused:
        report.dropped += 1  # a secret, or an instruction from outside content
        return
    report.stored.append(new_id)


async def extract_for_user(db: Database, settings: Settings, user_id: str, through: int, complete: Complete) -> Report:
    """Run one extraction for the user's messages up to `through`."""
    report = Report(user_id=user_id)
    memory = settings.config.memory

    def load() -> tuple[tuple[list[dict], list[str]], list[knowledge.Knowledge]]:
        conn = db.conn()
        return _load_batch(conn, settings, user_id, through), knowledge.active_facts(conn, user_id)

    (messages, outside), known = await asyncio.to_thread(load)
    report.messages = len(messages)
    if not messages:
        await asyncio.to_thread(lambda: _finish(db.conn(), user_id, through))
        return report
    try:
        answer = await complete(system=EXTRACT_SYSTEM, prompt=_extract_prompt(messages, known), user_id=user_id)
    except Exception as exc:
        # The model is down or refused: keep the queue row and try again later.
        report.error = f"{type(exc).__name__}: {exc}"
        log.warning("extraction for user %s failed, retrying later: %s", user_id, report.error)
        retry_at = time.time() + max(memory.extraction_debounce_seconds, 1.0) * 4
        await asyncio.to_thread(lambda: db.conn().execute(RESCHEDULE_SQL, (retry_at, user_id)))
        return report
    kept = await _sift(db, settings, user_id, parse_facts(answer), messages, known, report, outside)
    for fact in kept:
        await _store(db, settings, user_id, fact, complete, report)
    await asyncio.to_thread(lambda: _finish(db.conn(), user_id, through))
    log.info(
        "extraction for user %s: %d messages, %d facts stored, %d dropped, %d superseded",
        user_id,
        report.messages,
        len(report.stored),
        report.dropped,
        len(report.superseded),
    )
    return report


async def run_due(db: Database, settings: Settings, complete: Complete, *, now: float | None = None) -> list[Report]:
    """Run every extraction whose debounce has passed; returns one report per user."""
    moment = time.time() if now is None else now
    due = await asyncio.to_thread(lambda: rows(db.conn(), DUE_SQL, (moment,)))
    return [await extract_for_user(db, settings, r["user_id"], r["through_message_id"], complete) for r in due]
