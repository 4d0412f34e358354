"""Time in memory (lib/memory/search/when.py): relative dates resolved against when they were said, dates
named in a question, and a dated question finding the turn that said "two weeks ago".

The search runs over a real SQLite file through the real write path, full-text ranking only
(embeddings off), so what moves is the time step."""

from __future__ import annotations

from datetime import date

import pytest

from lib.db import rows
from lib.memory import store
from lib.memory.search import conversation, index, retrieval, when

OWNER = "1001"
MONDAY_8_MAY_2023 = date(2023, 5, 8)


@pytest.mark.parametrize(
    ("said", "meant"),
    [
        ("I went to a pottery class two weeks ago", "two weeks ago: 24 April 2023"),
        ("we moved here last year", "last year: 2022"),
        ("Last Friday was the concert", "last friday: 5 May 2023"),
        ("yesterday was rough", "yesterday: 7 May 2023"),
        ("10 days ago I quit", "10 days ago: 28 April 2023"),
        ("a couple of months ago", "a couple of months ago: March 2023"),
        ("3 years ago we met", "3 years ago: 2020"),
        ("last week was busy", "last week: the week of 1 May 2023"),
        ("last weekend we hiked", "last weekend: the weekend of 6 May 2023"),
        ("next month I start", "next month: June 2023"),
        ("see you next Monday", "next monday: 15 May 2023"),
        ("tomorrow then", "tomorrow: 9 May 2023"),
        ("the weekly sync, a while ago", ""),  # no date meant: nothing guessed
    ],
)
def test_relative_dates_resolve_against_the_day_they_were_said(said, meant):
    assert when.annotation(said, MONDAY_8_MAY_2023) == meant


@pytest.mark.parametrize(
    ("question", "first", "last", "any_year"),
    [
        ("What did she do in late April 2023?", date(2023, 4, 1), date(2023, 4, 30), False),
        ("What happened on 24 April?", date(2000, 4, 24), date(2000, 4, 24), True),
        ("And on May 7, 2023?", date(2023, 5, 7), date(2023, 5, 7), False),
        ("Where did we go in 2022?", date(2022, 1, 1), date(2022, 12, 31), False),
        ("What did I do last week?", date(2026, 11, 16), date(2026, 11, 22), False),
    ],
)
def test_dates_a_question_names_become_spans(question, first, last, any_year):
    (span,) = when.spans_in_query(question, date(2026, 11, 23))
    assert (span.start, span.end, span.any_year) == (first, last, any_year)


def test_a_question_without_a_date_names_none():
    assert when.spans_in_query("what may I bring to the party?", date(2026, 11, 23)) == []


def test_a_day_of_any_year_meets_that_day_in_a_given_year():
    april_24 = when.spans_in_query("on 24 April", date(2026, 11, 23))[0]
    assert april_24.meets(when.Span(date(2023, 4, 20), date(2023, 4, 27)))
    assert not april_24.meets(when.Span(date(2023, 5, 1), date(2023, 5, 7)))


def _said_on(conn, settings, session, day: str, text: str) -> int:
    message = store.add_message(conn, session, OWNER, "user", text, created_at=f"{day}T18:00:00.000Z")
    index.index_messages(conn, settings, [message])
    return message


def test_a_dated_question_finds_the_turn_that_said_two_weeks_ago(db):
    settings, conn = db
    session = _session(conn, OWNER)
    pottery = _said_on(conn, settings, session, "2023-05-08", "I finally tried a pottery class two weeks ago!")
    _said_on(conn, settings, session, "2023-05-20", "Another pottery class today, made a bowl.")
    _said_on(conn, settings, session, "2023-06-02", "Pottery again, the class is getting crowded.")

    chunk = conn.execute("SELECT content FROM search_chunks WHERE ref_id = ?", (pottery,)).fetchone()[0]
    assert chunk.startswith("[8 May 2023; two weeks ago: 24 April 2023] ")
    found = retrieval.search_messages(conn, settings, user_id=OWNER, query="What class did I take in April 2023?")
    assert found[0].id == pottery


def test_a_turn_said_inside_the_named_span_is_preferred(db):
    settings, conn = db
    session = _session(conn, OWNER)
    ids = [
        _said_on(conn, settings, session, day, "Dinner at the Lebanese place with Sara.")
        for day in ("2023-03-11", "2023-07-15", "2023-09-02")
    ]
    scores = dict.fromkeys(ids, 1.0)
    by_id = {r["id"]: r for r in rows(conn, "SELECT id, content, created_at FROM messages")}

    adjusted = conversation.prefer_asked_time(
        scores, by_id, "Where did we eat in July 2023?", lambda stamp: index.local_moment(stamp, settings), date.today()
    )
    assert adjusted == {ids[0]: 1.0, ids[1]: 1.0 + conversation.TIME_BONUS, ids[2]: 1.0}


def _session(conn, chat: str) -> int:
    return store.open_session(conn, "telegram", chat, OWNER, "private").id
