"""Messages ranked as parts of a conversation (lib/memory/search/conversation.py): a turn that only says
"it" is found through the turns around it, and a question naming a person prefers their words.
Small synthetic conversations over a real SQLite file and the real write path (full-text
ranking alone: embeddings off, so what moves is the conversation step)."""

from __future__ import annotations

import pytest

from lib.memory import store
from lib.memory.search import conversation, index, retrieval

OWNER = "group-or-person"


def say(conn, settings, chat: str, lines: list[tuple[str, str]]) -> list[int]:
    """A session of (speaker, text) turns, stored and indexed; returns the message ids."""
    session = store.open_session(conn, "telegram", chat, OWNER, "supergroup")
    ids = [
        store.add_message(conn, session.id, OWNER, "user", text, metadata={"speaker": speaker})
        for speaker, text in lines
    ]
    index.index_messages(conn, settings, ids)
    return ids


def test_a_turn_between_two_matches_is_lifted_by_them(db):
    settings, conn = db
    before, pronoun, after = say(
        conn,
        settings,
        "trip",
        [
            ("Noor", "Did you book the ferry to Skye for the whisky tour?"),
            ("Ivo", "Yes! Saturday at nine, it leaves from Mallaig."),
            ("Noor", "Perfect, the Skye whisky tour it is then."),
        ],
    )
    other = say(conn, settings, "other", [("Ivo", "Unrelated: the plumber comes on Monday.")])[0]
    scores = {before: 1.0, after: 0.8, other: 0.5}
    by_id: dict[int, dict] = {}  # rows are read as needed

    spread = conversation.spread_to_neighbours(conn, OWNER, scores, by_id)

    # The answer ("Yes! Saturday at nine") shares no word with a question about the Skye ferry;
    # it takes a share of both neighbours (the larger one of the turn that asked), and nothing
    # crosses into another session. The asking turn keeps a little less.
    assert spread[pronoun] == pytest.approx(conversation.ANSWER_SHARE * 1.0 + conversation.NEIGHBOUR_SHARE * 0.8)
    assert spread[before] == pytest.approx(1.0 - conversation.QUESTION_DISCOUNT)
    assert spread[other] == pytest.approx(0.5)
    assert set(by_id) == set(spread)
    # Through the search: the answer comes back for a question in the words of its neighbours.
    found = retrieval.search_messages(conn, settings, user_id=OWNER, query="Skye whisky tour ferry", limit=3)
    assert "Yes! Saturday at nine, it leaves from Mallaig." in [r.content for r in found]


def test_neighbours_are_read_for_their_owner_only(db):
    settings, conn = db
    first, _ = say(conn, settings, "chat", [("Noor", "the ferry to Skye"), ("Ivo", "Saturday at nine")])
    by_id: dict[int, dict] = {}

    assert conversation.spread_to_neighbours(conn, "someone-else", {first: 1.0}, by_id) == {}


def test_a_question_naming_a_speaker_prefers_their_turns(db):
    settings, conn = db
    # Two chats, so neither turn's chunk carries the other as its neighbour: the words differ.
    say(conn, settings, "hikes", [("Tomasz", "Hiking hiking hiking: I love hiking in the Tatras, the best hiking.")])
    say(conn, settings, "trips", [("Maya", "I went hiking in the Dolomites in August.")])

    about_maya = retrieval.search_messages(conn, settings, user_id=OWNER, query="Where did Maya go hiking?")
    assert about_maya[0].content == "I went hiking in the Dolomites in August."
    # Naming both people prefers neither: the words decide.
    both = retrieval.search_messages(conn, settings, user_id=OWNER, query="Where did Maya and Tomasz go hiking?")
    assert both[0].content.startswith("Hiking hiking hiking")
    assert both[0].score > both[1].score  # decided by the words, not by a tie-break on time
    # A speaker's first name is enough, as a word of its own ("Mayan" is not "Maya").
    assert conversation._named("Maya Okafor", "what did maya say?")
    assert not conversation._named("Maya Okafor", "the Mayan ruins")


def test_the_answer_to_a_question_is_preferred_to_the_turn_that_asks(db, monkeypatch):
    settings, conn = db
    asked, answer, _ = say(
        conn,
        settings,
        "weekend",
        [
            ("Ivo", "How was the pottery workshop in Porto?"),
            ("Noor", "Loved it: I made a blue bowl, and the teacher wants me back in June."),
            ("Ivo", "Nice, see you Monday."),
        ],
    )
    # Other talk that shares a word each, as any real memory has.
    say(conn, settings, "other", [("Ivo", "We drove to Porto in May."), ("Noor", "The garage workshop got a drill.")])
    query = "What happened at the pottery workshop in Porto?"

    def first() -> int:
        return retrieval.search_messages(conn, settings, user_id=OWNER, query=query, limit=3)[0].id

    # The question's words are all in the turn that asks; what happened is in the reply.
    assert first() == answer
    monkeypatch.setattr(conversation, "ANSWER_SHARE", conversation.NEIGHBOUR_SHARE)
    monkeypatch.setattr(conversation, "QUESTION_DISCOUNT", 0.0)
    assert first() == asked  # with plain neighbour shares the words win


def test_only_a_persons_reply_answers_a_question(db):
    settings, conn = db
    session = store.open_session(conn, "telegram", "dm", OWNER, "private")
    turns = [
        ("assistant", "Good morning! Any plans for the weekend?"),
        ("user", "Any pottery workshop in Porto this Saturday? I'm a beginner."),
        ("assistant", "Oficina do Barro has a beginners' class. Which suits you, morning or afternoon?"),
        ("user", "Morning, and I'll bring my sister Ana."),
        ("assistant", "Booked for two at 10."),
    ]
    greeting, request, offer, reply, _ = [store.add_message(conn, session.id, OWNER, r, t) for r, t in turns]
    index.index_messages(conn, settings, [greeting, request, offer, reply])
    scores = {request: 1.0, offer: 0.6}

    spread = conversation.spread_to_neighbours(conn, OWNER, scores, {})

    # Ash's reply to the user's question is advice around its words: the asking turn keeps its
    # score and lends the reply a plain share. The user's answer to Ash's question is a fact of
    # theirs: it takes the answer's share, and Ash's asking turn is discounted.
    asks = conversation.asking_share(turns[2][1])
    assert spread[request] == pytest.approx(1.0 + conversation.NEIGHBOUR_SHARE * 0.6)
    assert spread[offer] == pytest.approx(
        0.6 + conversation.NEIGHBOUR_SHARE * 1.0 - conversation.QUESTION_DISCOUNT * asks
    )
    assert spread[reply] == pytest.approx(conversation.ANSWER_SHARE * 0.6)
    # A turn that joins as a neighbour is judged the same way: Ash's greeting asked the user.
    assert spread[greeting] == pytest.approx(
        conversation.NEIGHBOUR_SHARE * 1.0 - conversation.QUESTION_DISCOUNT * conversation.asking_share(turns[0][1])
    )


def test_what_counts_as_asking():
    assert conversation.asks("How was Porto?")
    assert conversation.asks("Wow! And then? 😊")  # a question before an emoji
    assert conversation.asks("真的吗？") and conversation.asks("هل ذهبت؟")  # full-width, Arabic
    assert not conversation.asks("Booked it: https://example.com/trip?id=42")  # a link's query
    assert not conversation.asks("Loved it.")
    # How much of a turn asks: all of a bare question, little of an answer with a courtesy
    # question at its end (Ash's "Want me to book one?"), which keeps most of its score.
    assert conversation.asking_share("How was Porto?") == 1.0
    assert conversation.asking_share("Loved it.") == 0.0
    booked = "Three hotels by the river have rooms on the 4th: Casa Azul, Rio and Ribeira. Want me to book one?"
    assert 0.1 < conversation.asking_share(booked) < 0.3
    # A full-width mark ends a sentence even with no space after it: five of nine characters ask.
    assert conversation.asking_share("你去了吗？我去了。") == pytest.approx(5 / 9)
    assert conversation.asking_share("Booked it: https://example.com/trip?id=42") == 0.0
