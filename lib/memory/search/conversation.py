"""Ranking messages as parts of a conversation, not as lone texts.

The kinds of miss this answers (LoCoMo dev, read by hand):

- The turn that holds the answer says "them", "Yes, last Friday!" or "I'm so excited!", and
  the words of the question are in the turn next to it, which is what gets found. So every
  candidate lends a share of its score (NEIGHBOUR_SHARE) to the turns just before and after it
  in the same session: a turn between two good matches rises, and the answer next to the
  question-shaped turn comes within reach. Neighbours come from the same session, so from the
  same owner (one chat's memory, lib/memory/scope.py); they are read with the owner checked.
- In a dialogue a question is answered by the next turn, and the turn that asks names the topic
  the answer only refers to ("What inspired you?" / "I painted it after visiting the LGBTQ
  center"). Evidence of what was said lives in statements: on LoCoMo dev 27% of all turns ask
  something, 13% of the evidence turns, 33% of the wrong turns in a top 10; and 54% of the
  evidence turns follow a turn that asks. So a turn that asks lends ANSWER_SHARE (instead of
  NEIGHBOUR_SHARE) to the turn after it and loses QUESTION_DISCOUNT x the share of its text
  that asks (so an answer of Ash's that ends "Want me to book it?" stays nearly whole). Measured
  (bench/locomo.py): 0.828 -> 0.850 (tuned 0.835 -> 0.861, held out 0.817 -> 0.831), every
  category up; what reaches the prompt 0.851 -> 0.861; with MiniLM 0.813 -> 0.833.
- Only a person's reply answers (BEAM's assistant chats): the person's facts are in the turns
  that ask Ash ("I'm stressed about saving $2,000 by June 30, can you help me plan?"), and Ash's
  reply is advice that repeats their words. The step above lowered both BEAM halves there, so a
  turn asks only when a person's turn (role "user") comes after it: people in a group, or the
  user answering Ash's "Which day suits you?". BEAM 0.631 -> 0.641 (dev 0.619 either way, held
  out 0.644 -> 0.665; prompt 0.770 -> 0.772); LoCoMo, two people, unchanged (0.845).
- A question that names a person ("What did Caroline research?") is about that person's own
  words, while the other speaker's turns share the topic. When the query names exactly one of
  the speakers among the candidates, that speaker's turns get SPEAKER_BONUS. Names are the
  speakers stored with group messages and imported conversations; private chats have none,
  and then nothing changes.
- A question that names a time ("in April 2023", "last week") is about what was said then, or
  said of then: candidates said inside the span, or whose relative dates ("two weeks ago")
  resolve into it (lib/memory/search/when.py), get TIME_BONUS.
- Two steps measured well on the tuning conversations and were taken out when both files were
  split in halves (docs/memory/retrieval.md, "Ablation"): TIME_BONUS again for any turn that
  says a time when the question asks when (+0.001 on LoCoMo's held-out half, nothing on BEAM's)
  and a share of the session's best score for every turn of it (+0.010 and +0.019 on the two
  dev halves, 0.000 on both held-out halves).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import date, datetime

import apsw

from lib.db import rows
from lib.memory.search import when

# Measured on the three LoCoMo dev conversations used for tuning (bench/locomo.py):
# hybrid R@10 0.771 -> 0.791 (neighbours), 0.797 (speaker), 0.816 (both, with VECTOR_WEIGHT 0.5).
NEIGHBOUR_SHARE = 0.2
SPEAKER_BONUS = 0.3
TIME_BONUS = 0.3
# A turn that asks lends this much to the turn after it, its answer, and loses QUESTION_DISCOUNT
# x the share of its text that asks (chosen on the three tuning conversations: answer shares
# 0.3-0.6 with a flat discount of 0.1-0.15 landed within 0.003 of each other, and this discount
# by share at 0.2 or 0.3 ties with the flat one).
ANSWER_SHARE = 0.5
QUESTION_DISCOUNT = 0.2
MIN_NAME_CHARS = 3
# Question marks: Latin, full-width, Arabic. One that ends a sentence asks (not one inside a
# link's query string).
_MARKS = "?\uff1f\u061f"
_ASKS = re.compile(rf"[{_MARKS}](?!\w)")
# Where a sentence ends: Latin and Arabic marks before a space, full-width (CJK) ones anywhere.
_SENTENCE_END = re.compile(r"(?<=[.!…?\u061f])(?=\s)|(?<=[\u3002\uff01\uff1f])|\n")

NEIGHBOURS_SQL = """
SELECT m.id AS ref,
    (SELECT p.id FROM messages p
     WHERE p.session_id = m.session_id AND p.id < m.id AND p.role IN ('user', 'assistant')
     ORDER BY p.id DESC LIMIT 1) AS before,
    (SELECT n.id FROM messages n
     WHERE n.session_id = m.session_id AND n.id > m.id AND n.role IN ('user', 'assistant')
     ORDER BY n.id LIMIT 1) AS after
FROM messages m
WHERE m.owner_user_id = ? AND m.id IN (SELECT value FROM json_each(?))
"""
ROWS_SQL = """
SELECT id, session_id, role, content, token_count, created_at, metadata
FROM messages WHERE owner_user_id = ? AND id IN (SELECT value FROM json_each(?))
"""


def asks(text: str) -> bool:
    """The turn asks something (a sentence of it ends with a question mark)."""
    return bool(_ASKS.search(text))


def asking_share(text: str) -> float:
    """The share of the turn's text in sentences that ask: 1.0 for "How was Porto?", small for a
    long answer that ends with "Want me to book it?"."""
    if not any(mark in text for mark in _MARKS):  # most turns: no need to split them
        return 0.0
    sentences = [s.strip() for s in _SENTENCE_END.split(text)]
    total = sum(len(s) for s in sentences)
    return sum(len(s) for s in sentences if asks(s)) / total if total else 0.0


def spread_to_neighbours(
    conn: apsw.Connection, owner: str, scores: dict[int, float], by_id: dict[int, dict]
) -> dict[int, float]:
    """Each candidate's score plus NEIGHBOUR_SHARE of its neighbours' scores (ANSWER_SHARE of a
    turn before it that asks a person), less QUESTION_DISCOUNT x the share of it that asks;
    neighbours that were not candidates join with their share (their rows are added to `by_id`).

    A turn asks a person when the turn after it is a person's (role "user"): what someone says
    in reply is a fact of theirs, while Ash's reply to a question is advice around the words of
    the question, and the person's own turn stays the evidence ("I'm going at 4 PM, is that
    ok?")."""
    if not scores or not NEIGHBOUR_SHARE:
        return scores
    _read_rows(conn, owner, scores, by_id)
    around = _around(conn, owner, scores)
    after_of = {ref: after for ref, _, after in around}
    _read_rows(conn, owner, [n for _, before, after in around for n in (before, after) if n is not None], by_id)
    asking = {ref: _asking_a_person(ref, after_of, by_id) for ref in scores if ref in by_id}
    spread = dict(scores)
    for ref, before, after in around:
        if before is not None:
            spread[before] = spread.get(before, 0.0) + NEIGHBOUR_SHARE * scores[ref]
        if after is not None:
            share = ANSWER_SHARE if asking[ref] else NEIGHBOUR_SHARE
            spread[after] = spread.get(after, 0.0) + share * scores[ref]
    joined = [ref for ref in spread if ref in by_id and ref not in asking]
    # A neighbour that joined is only discounted when it asks a person: its own next turn is read
    # for the few that ask at all (a quarter of turns), not for every one of them.
    maybe = [ref for ref in joined if asking_share(by_id[ref]["content"])]
    if maybe:
        after_of |= {ref: after for ref, _, after in _around(conn, owner, maybe)}
        _read_rows(conn, owner, [after_of[ref] for ref in maybe if after_of.get(ref) is not None], by_id)
    asking |= {ref: _asking_a_person(ref, after_of, by_id) for ref in joined}
    return {ref: score - QUESTION_DISCOUNT * asking[ref] for ref, score in spread.items() if ref in by_id}


def _asking_a_person(ref: int, after_of: dict[int, int | None], by_id: dict[int, dict]) -> float:
    """The share of the turn that asks, when a person's turn comes after it (0 otherwise)."""
    row = by_id[ref]
    after = after_of.get(ref)
    if after is None or by_id.get(after, {}).get("role") != "user":
        return 0.0
    return asking_share(row["content"])


def _read_rows(conn: apsw.Connection, owner: str, refs, by_id: dict[int, dict]) -> None:
    """Add to `by_id` the rows of those of `refs` (messages of `owner`) it lacks."""
    missing = [ref for ref in refs if ref not in by_id]
    if missing:
        by_id.update({r["id"]: r for r in rows(conn, ROWS_SQL, (owner, json.dumps(missing)))})


def _around(conn: apsw.Connection, owner: str, refs) -> list[tuple[int, int | None, int | None]]:
    """Each of `refs` (messages of `owner`) with the turns just before and after it in its
    session (None at a session's edge)."""
    found = rows(conn, NEIGHBOURS_SQL, (owner, json.dumps(list(refs))))
    return [(r["ref"], r["before"], r["after"]) for r in found]


def neighbours(conn: apsw.Connection, owner: str, refs: set[int]) -> set[int]:
    """The turns just before and after each of `refs` in its session."""
    if not refs:
        return set()
    return {n for _, before, after in _around(conn, owner, refs) for n in (before, after) if n is not None}


def _speaker(row: dict) -> str | None:
    metadata = row.get("metadata") or ""
    if '"speaker"' not in metadata:  # private chats store none: no need to parse ~300 rows a search
        return None
    name = json.loads(metadata).get("speaker")
    return name.strip() if isinstance(name, str) and name.strip() else None


def _named(name: str, query: str) -> bool:
    """The query names this speaker: the whole name, or its first word (people say "Alice" for
    "Alice Smith"), as a word of its own."""
    first = name.split()[0]
    for form in {name, first}:
        if len(form) >= MIN_NAME_CHARS and re.search(rf"(?<!\w){re.escape(form)}(?!\w)", query, re.IGNORECASE):
            return True
    return False


def prefer_named_speaker(scores: dict[int, float], by_id: dict[int, dict], query: str) -> dict[int, float]:
    """SPEAKER_BONUS for the turns of the one speaker the query names (none when it names two)."""
    speakers = {ref: _speaker(by_id[ref]) for ref in scores}
    named = {name for name in set(speakers.values()) if name and _named(name, query)}
    if len(named) != 1:
        return scores
    (name,) = named
    return {ref: score + SPEAKER_BONUS * (speakers[ref] == name) for ref, score in scores.items()}


def prefer_asked_time(
    scores: dict[int, float],
    by_id: dict[int, dict],
    query: str,
    local: Callable[[str], datetime | None],
    today: date,
) -> dict[int, float]:
    """TIME_BONUS for the turns said in, or speaking of, a time the query names; `local` turns a
    stored timestamp into the moment in the user's time zone."""
    named = when.spans_in_query(query, today)
    if not named:
        return scores
    adjusted = {}
    for ref, score in scores.items():
        said = local(by_id[ref]["created_at"])
        if said is None:
            adjusted[ref] = score
            continue
        spoken_of = when.mentions(by_id[ref]["content"], said.date())
        meets = any(span.meets(wanted) for span in spoken_of for wanted in named)
        adjusted[ref] = score + TIME_BONUS * meets
    return adjusted


def rank(
    conn: apsw.Connection,
    owner: str,
    scores: dict[int, float],
    by_id: dict[int, dict],
    query: str,
    local: Callable[[str], datetime | None],
    today: date,
) -> dict[int, float]:
    """Every adjustment above, in order: neighbours, the named speaker, the asked time (may add
    neighbours' rows to `by_id`)."""
    scores = spread_to_neighbours(conn, owner, scores, by_id)
    scores = prefer_named_speaker(scores, by_id, query)
    return prefer_asked_time(scores, by_id, query, local, today)
