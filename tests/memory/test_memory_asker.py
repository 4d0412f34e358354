"""A question about the asker (lib/memory/search/asker.py): in a chat between a person and Ash,
"I" and "my" mean the person, whose own turns hold their facts, and their newest word on a
subject outranks the one it replaced. Small synthetic chats over a real SQLite file and the
real write path, full-text ranking alone (embeddings off), so what moves is the asker step."""

from __future__ import annotations

from datetime import date

import pytest

from lib.memory import store
from lib.memory.search import asker, index, retrieval

OWNER = "42"
# Ash's answer: long, and full of the words the person used (as BEAM's assistant turns are).
LONG = (
    "Visiting Foot Locker on a Saturday is a good plan. Saturday afternoons at Foot Locker can be busy, "
    "so a visit early or late in the day gives you time to try both pairs. Before the visit, check which "
    "Foot Locker has your size in stock; on Saturday the staff may have less time. "
) * 3


def chat(conn, settings, chat_id: str, turns: list[tuple[str, str]], day: str) -> list[int]:
    """One session of (role, text) turns said on `day`, stored and indexed; their ids."""
    session = store.open_session(conn, "telegram", chat_id, OWNER, "private")
    ids = [
        store.add_message(conn, session.id, OWNER, role, text, created_at=f"{day}T10:{i:02d}:00.000Z")
        for i, (role, text) in enumerate(turns)
    ]
    index.index_messages(conn, settings, ids)
    return ids


def ranked(conn, settings, query: str) -> list[int]:
    return [r.id for r in retrieval.search_messages(conn, settings, user_id=OWNER, query=query, limit=10)]


def test_a_question_in_the_first_person_finds_the_persons_own_turn_before_ashs_answers(db, monkeypatch):
    settings, conn = db
    said, answer = chat(
        conn,
        settings,
        "shoes",
        [
            ("user", "I'm going to Foot Locker next Saturday at 4 PM to try both pairs, is that ok?"),
            ("assistant", LONG),
        ],
        "2024-04-01",
    )
    other = [
        ("user", "The Saturday market had good coffee."),
        ("assistant", "Nice! Markets are fun on a Saturday."),
        ("user", "What time does the pharmacy open?"),
        ("assistant", "Most open at 9."),
    ]
    chat(conn, settings, "other", other, "2024-03-01")
    question = "What time should I visit Foot Locker on Saturday?"

    assert ranked(conn, settings, question)[0] == said
    # The mechanism removed (no bonus for the asker's own turns): Ash's answer, which repeats
    # the words, comes first.
    monkeypatch.setattr(asker, "OWN_TURN_BONUS", 0.0)
    assert ranked(conn, settings, question)[0] == answer


def test_a_question_about_someone_else_is_left_alone(db):
    assert asker.about_the_asker("What time should I visit Foot Locker?")
    assert asker.about_the_asker("Where's my passport?")
    assert not asker.about_the_asker("What did Caroline research?")
    assert not asker.about_the_asker("Can you sum up the options we've talked about for my runs?")
    assert not asker.about_the_asker("When did Melanie paint a sunrise? i.e. which year")


def test_the_newest_value_outranks_the_one_it_replaced(db, monkeypatch):
    settings, conn = db
    (old,) = chat(conn, settings, "march", [("user", "My annual sneaker budget is $500, all in.")], "2024-03-01")
    chat(conn, settings, "chat", [("user", "Which laces go with white sneakers?")], "2024-03-10")
    (new,) = chat(conn, settings, "may", [("user", "I raised the sneaker budget to $650.")], "2024-05-01")
    question = "What is my annual sneaker budget?"

    found = ranked(conn, settings, question)
    assert found.index(new) < found.index(old)
    # The mechanism removed: the older turn, which says "annual" too, wins.
    monkeypatch.setattr(asker, "NEWEST_FIRST", False)
    found = ranked(conn, settings, question)
    assert found.index(old) < found.index(new)
    # A question about the past is not turned around.
    monkeypatch.undo()
    found = ranked(conn, settings, "What was my original annual sneaker budget?")
    assert found.index(old) < found.index(new)


def test_the_newest_value_wins_whoever_the_question_names(db):
    settings, conn = db
    (old,) = chat(
        conn, settings, "april", [("user", "Probate in Montserrat takes 6-9 months, Stephanie says.")], "2024-04-02"
    )
    chat(conn, settings, "chat", [("user", "Which documents does probate need?")], "2024-04-20")
    (new,) = chat(
        conn,
        settings,
        "june",
        [("user", "Good news: probate in Montserrat was shortened to 5-7 months.")],
        "2024-06-01",
    )

    # Not in the first person, still a value that changed: the newest word on it first.
    found = ranked(conn, settings, "How long does probate in Montserrat take?")
    assert found.index(new) < found.index(old)
    # A question about how things went between the person and Ash wants every turn in its
    # place, and one about the past its old value.
    for about_the_story in ("How long does the probate we discussed take in Montserrat?", "How long did probate take?"):
        found = ranked(conn, settings, about_the_story)
        assert found.index(old) < found.index(new)
    assert asker.asks_about_now("What is the budget allocated for prototype refinement?", date(2024, 6, 1))
    assert asker.asks_about_now("What did I say we pay for rent?", date(2024, 6, 1)) is False  # "did"
    assert not asker.asks_about_now("Sum up how my preferences developed over our conversations", date(2024, 6, 1))


def test_a_question_about_what_the_asker_said_finds_their_turns_before_ashs(db, monkeypatch):
    settings, conn = db
    reply = "Planning with Douglas sounds good. With Douglas, agree on the plans early; Douglas and you can " * 4
    said = []
    for n, (day, text) in enumerate(
        [
            ("2024-03-01", "Douglas and I want to sell the cabin this summer."),
            ("2024-04-01", "My plans with Douglas changed: we keep the cabin for now."),
            ("2024-05-01", "Douglas will look after the will's paperwork."),
        ]
    ):
        said.append(chat(conn, settings, f"s{n}", [("user", text), ("assistant", reply)], day)[0])
    other = [("user", "What should I cook tonight?"), ("assistant", "Try a risotto.")]
    chat(conn, settings, "other", other, "2024-06-01")
    question = "Can you list the order in which I brought up my plans involving Douglas throughout our conversations?"

    assert set(ranked(conn, settings, question)[:3]) == set(said)
    # The mechanism removed: "our conversations" takes the question for one about what the person
    # and Ash discussed, and Ash's replies, which say "Douglas" and "plans" over and over, come first.
    monkeypatch.setattr(asker, "SAID_FIRST", False)
    monkeypatch.setattr(asker, "asks_what_the_asker_said", lambda query: False)
    assert set(ranked(conn, settings, question)[:3]) != set(said)


@pytest.mark.parametrize(
    ("question", "said"),
    [
        ("Can you walk me through the order in which I brought up my patent plans across our chats?", True),
        ("How many different shoe sizes have I mentioned across my messages?", True),
        ("What monthly amount did I say I'm paying for my place?", True),
        ("How old did I say my son is?", True),
        ("What is my annual sneaker budget?", False),
        ("Can you sum up the options we've talked about for my runs?", False),
        ("What did Caroline say about the race?", False),
    ],
)
def test_a_question_about_what_the_asker_said_is_recognised(question, said):
    assert asker.asks_what_the_asker_said(question) is said
