"""The relevance floor (lib/memory/search/relevance.py): small talk pulls nothing into the prompt, while a
question about something in memory still gets it, and the turn next to it.

Real SQLite file, real migrations, the real write path and the real local embedding model (the
floor's cosine thresholds belong to it)."""

from __future__ import annotations

from contextlib import closing

import pytest

from lib.config import load_settings
from lib.memory import store
from lib.memory.api import retrieve_context
from lib.memory.search import index, relevance, retrieval
from tests.support.memory_retrieval import add_knowledge, open_db, turn

ALICE = "1001"

DIARY = [
    ("The boiler engineer comes on Monday at nine.", "I'll remind you on Sunday evening."),
    ("I've been training for the Lisbon half marathon, 18 km today.", "Strong pace!"),
    ("Our cat Miso knocked the basil plant off the windowsill again.", "Classic cat behaviour."),
    ("Work was good, the quarterly report is finally done.", "Well done, that was a slog."),
    ("Good news: the bank approved the mortgage for the flat.", "Congratulations!"),
    ("It was a good day overall, just tired.", "Rest well."),
    ("The dentist moved my appointment to the 14th.", "Noted, the 14th then."),
    ("I'm reading a history of the Hanseatic League, slow but good.", "Sounds fascinating."),
]
# A lived-in memory: weeks of everyday turns, so everyday words are common in it, as they are
# in anyone's (in a young memory every word is rare, and then it counts as evidence).
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
DOINGS = [
    "had a good run along the river",
    "cooked a good pasta with friends",
    "worked late, good progress on the project",
    "went shopping for groceries, nothing good left",
    "watched a good film at home",
    "called my parents, good to hear them",
    "cleaned the flat all day, good riddance to the dust",
    "took the train to work, it was late again",
]
EVERYDAY = [(f"{day}: {doing}.", "Sounds good!") for day in DAYS for doing in DOINGS]
# A conversation between two people the owner shared: the answer's turn shares no word with the
# question, and its neighbour's words are further from it than a chunk's context reaches.
NEWS = (
    "Ines called from Porto: the children's hospital took her, the paediatric ward! "
    + "Then we talked for an hour about the flat she wants, the neighbourhood, the tram line, the "
    + "noise from the bars downstairs, whether the landlord will fix the heating, the furniture "
    + "she has to buy, the price of everything there, and her cat that hates car journeys."
)
ANSWER = "Oh and it's the first Monday of March, she can't wait."
SMALL_TALK = ["thanks!", "ok", "what's 2+2", "how are you?", "tell me a joke", "good morning", "sounds good"]


@pytest.fixture(scope="module")
def memory(tmp_path_factory):
    """One lived-in memory for the module (building it embeds a few hundred chunks); tests only
    read it, except the last, which adds a knowledge entry of its own."""
    settings = load_settings({"ASH_HOME": str(tmp_path_factory.mktemp("ash-home"))})
    with closing(open_db(settings)) as conn:
        for said, answer in EVERYDAY + DIARY:
            turn(conn, settings, ALICE, said, answer)
        shared = store.open_session(conn, "telegram", "import", ALICE, "private")
        ids = [
            store.add_message(conn, shared.id, ALICE, "user", text, metadata={"speaker": speaker})
            for speaker, text in [("Sam", NEWS), ("Sam", ANSWER), ("Kit", "Wonderful news, give her my love.")]
        ]
        index.index_messages(conn, settings, ids)
        yield settings, conn


def test_small_talk_pulls_nothing_into_the_prompt(memory):
    settings, conn = memory
    pulled = {message: len(retrieve_context(conn, settings, user_id=ALICE, query=message)) for message in SMALL_TALK}
    assert pulled == dict.fromkeys(SMALL_TALK, 0)
    # An explicit search (the recall tool, `ash sessions search`) still ranks whatever there is.
    assert retrieval.search_messages(conn, settings, user_id=ALICE, query="good morning")


def test_a_question_about_memory_gets_it_and_the_turn_that_answers_it(memory):
    settings, conn = memory
    query = "When does Ines start at the hospital in Porto?"
    shown = [r.content for r in retrieve_context(conn, settings, user_id=ALICE, query=query)]

    assert NEWS in shown[:3]
    # No rare word of the question, not close to it: it passes as the neighbour of a turn that is.
    assert ANSWER in shown


def test_common_words_are_not_evidence_rare_ones_are(memory):
    settings, conn = memory
    # "good" is in most chunks, "miso" in a few (its turn's and the turns around it).
    assert relevance.rare_terms(conn, ["good", "miso", "zeppelin"]) == ["miso"]
    shown = retrieve_context(conn, settings, user_id=ALICE, query="what did Miso do?")
    assert "Our cat Miso knocked the basil plant off the windowsill again." in [r.content for r in shown]


def test_the_rare_share_grows_with_memory(memory, monkeypatch):
    _, conn = memory
    monkeypatch.setattr(relevance, "RARE_COUNT", 1)
    assert relevance.rare_terms(conn, ["miso"]) == []  # in its turn and the turns around it
    monkeypatch.setattr(relevance, "RARE_SHARE", 0.5)
    assert relevance.rare_terms(conn, ["miso"]) == ["miso"]


def test_knowledge_passes_the_same_floor(memory):
    settings, conn = memory
    add_knowledge(conn, settings, "Alice's passport number is P-998877, valid until 2031.", ALICE)

    asked = retrieve_context(conn, settings, user_id=ALICE, query="what's my passport number?")
    assert "Alice's passport number is P-998877, valid until 2031." in [r.content for r in asked]
    assert retrieve_context(conn, settings, user_id=ALICE, query="thanks!") == []
