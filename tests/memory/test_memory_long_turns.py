"""Long turns in an assistant chat: the vectors go where retrieval needs them (an answer's opening,
the start of a paste), a long message reaches the prompt as its matching part, and what the
search ranks best is not dropped by the relevance floor. Small synthetic chats over a real
SQLite file; the embedder is a stand-in that counts what it is asked to embed, so nothing
here depends on the machine's speed."""

from __future__ import annotations

import zlib
from contextlib import closing
from typing import ClassVar

import numpy as np
import pytest

from lib.memory import store
from lib.memory.api import record_turn, retrieve_context
from lib.memory.search import chunking, e5, excerpt, index, relevance, retrieval
from tests.support.memory_retrieval import open_db, settings_with

OWNER = "7"
MARKDOWN = "\n".join(
    f"## Step {n}\nInstall the package, then run `make step{n}` and check the log for errors before going on."
    for n in range(1, 31)
)  # ~3,000 characters of an answer
PASTE = "\n".join(f"{n:06d} INFO worker-{n % 7} handled request in {n % 90} ms" for n in range(2500))  # ~100 KB


class CountingEmbedder:
    """Word-hash vectors (texts sharing words are close), and a count of the texts embedded."""

    texts: ClassVar[list[str]] = []

    def embed(self, texts, *, query=False):
        CountingEmbedder.texts += list(texts)
        out = np.zeros((len(texts), e5.DIMENSIONS), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                out[i, zlib.crc32(word.encode()) % e5.DIMENSIONS] += 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


@pytest.fixture
def counted(ash_home, monkeypatch):
    monkeypatch.setattr(e5.E5Embedder, "embed", CountingEmbedder.embed)
    CountingEmbedder.texts = []
    settings = settings_with(ash_home)
    with closing(open_db(settings)) as conn:
        yield settings, conn


def chunk_states(conn, message_id: int) -> list[int]:
    found = conn.execute(
        "SELECT embedded FROM search_chunks WHERE kind = 'message' AND ref_id = ? ORDER BY ordinal", (message_id,)
    )
    return [row[0] for row in found]


def test_a_long_answer_gets_one_vector_for_its_opening_and_full_text_for_the_rest(counted):
    settings, conn = counted
    session = store.open_session(conn, "telegram", OWNER, OWNER, "private")
    asked, answer = record_turn(
        conn, settings, session_id=session.id, user_id=OWNER, user_text="How do I set it up?", answer_text=MARKDOWN
    )

    states = chunk_states(conn, answer)
    assert len(states) >= 4 and states == [index.EMBEDDED] + [index.FULL_TEXT_ONLY] * (len(states) - 1)
    assert chunk_states(conn, asked) == [index.EMBEDDED]
    # The answer's vector is of its opening: a few hundred characters, not a third of the Markdown.
    opening = conn.execute("SELECT content FROM search_chunks WHERE ref_id = ? AND ordinal = 0", (answer,)).fetchone()[
        0
    ]
    assert "Step 1" in opening and "Step 5" not in opening
    # Every part is still found by its words, and nothing is left "waiting for a vector".
    hits = conn.execute("SELECT count(*) FROM search_fts WHERE search_fts MATCH 'step30'").fetchone()[0]
    assert hits == 1
    assert index.backfill_vectors(conn, settings) == 0
    assert index.index_status(conn, settings)["message"] == "index is up to date"


def test_a_100_kb_paste_costs_two_vectors_not_a_hundred(counted):
    settings, conn = counted
    session = store.open_session(conn, "telegram", OWNER, OWNER, "private")
    pasted, _ = record_turn(
        conn, settings, session_id=session.id, user_id=OWNER, user_text=PASTE, answer_text="That log looks healthy."
    )

    states = chunk_states(conn, pasted)
    assert len(states) > 100
    assert states.count(index.EMBEDDED) == 2
    # The embedder saw two chunks of the paste and one of the answer.
    assert len(CountingEmbedder.texts) == 3


def test_the_opening_is_cut_at_a_sentence_within_its_limit():
    first, rest = chunking.opening("One. Two is longer. " + "Three " * 100, 25)
    assert first == "One. Two is longer."
    assert rest.startswith("Three")
    assert chunking.opening("Short answer.", 400) == ("Short answer.", "")


def long_answers(conn, settings, count: int) -> list[int]:
    """`count` sessions, each a question about the lighthouse and a 3,000-character answer."""
    ids = []
    for n in range(count):
        session = store.open_session(conn, "telegram", f"c{n}", OWNER, "private")
        body = MARKDOWN.replace("Step 17\n", f"Step 17\nThe lighthouse lantern {n} needs twelve panes of glass. ")
        ids.append(
            record_turn(
                conn, settings, session_id=session.id, user_id=OWNER, user_text=f"Lantern {n}?", answer_text=body
            )[1]
        )
    return ids


def test_a_long_message_reaches_the_prompt_as_its_matching_part(ash_home, monkeypatch):
    settings = settings_with(ash_home, '[embeddings]\nprovider = "none"\n')
    with closing(open_db(settings)) as conn:
        answers = set(long_answers(conn, settings, 3))
        query = "How many panes of glass does the lighthouse lantern need?"

        shown = [r for r in retrieve_context(conn, settings, user_id=OWNER, query=query) if r.id in answers]
        assert len(shown) == 3
        assert all(len(r.content) <= excerpt.EXCERPT_CHARS + 2 and "twelve panes" in r.content for r in shown)
        # The mechanism removed: whole answers, and the token budget holds two of them.
        monkeypatch.setattr(excerpt, "EXCERPT_CHARS", 10**6)
        shown = [r for r in retrieve_context(conn, settings, user_id=OWNER, query=query) if r.id in answers]
        assert len(shown) == 2


def test_what_the_search_ranks_best_passes_the_floor(ash_home, monkeypatch):
    settings = settings_with(ash_home, '[embeddings]\nprovider = "none"\n')
    with closing(open_db(settings)) as conn:
        session = store.open_session(conn, "telegram", OWNER, OWNER, "private")
        filler = [f"The budget for item {n} is fine." for n in range(6)] + [f"We set item {n} aside." for n in range(6)]
        for text in filler:
            record_turn(conn, settings, session_id=session.id, user_id=OWNER, user_text=text, answer_text="Ok.")
        other = store.open_session(conn, "telegram", "trip", OWNER, "private")
        record_turn(conn, settings, session_id=other.id, user_id=OWNER, user_text="Zeppelin!", answer_text="Wow.")
        later = store.open_session(conn, "telegram", "money", OWNER, "private")
        evidence, _ = record_turn(
            conn, settings, session_id=later.id, user_id=OWNER, user_text="I set the budget at 650.", answer_text="Ok."
        )
        query = "What budget did I set for the zeppelin ride?"

        # "budget" and "set" are in many turns (not rare), no vectors: only the ranking vouches for it.
        assert evidence in [r.id for r in retrieve_context(conn, settings, user_id=OWNER, query=query)]
        monkeypatch.setattr(relevance, "KEEP_BEST", 0)
        assert evidence not in [r.id for r in retrieve_context(conn, settings, user_id=OWNER, query=query)]
        # Small talk still brings nothing: a question about nothing in memory passes no floor.
        assert retrieve_context(conn, settings, user_id=OWNER, query="thanks, that's all") == []


def test_a_question_about_a_person_memory_knows_passes_the_floor_on_common_words(ash_home, monkeypatch):
    settings = settings_with(ash_home, '[embeddings]\nprovider = "none"\n')
    with closing(open_db(settings)) as conn:
        session = store.open_session(conn, "telegram", OWNER, OWNER, "private")
        # "tasks", "organize", "share" are in many turns (Ash's long answers repeat them): none is rare.
        for n in range(8):
            record_turn(
                conn,
                settings,
                session_id=session.id,
                user_id=OWNER,
                user_text=f"Thanks for point {n}.",
                answer_text=f"To organize tasks you can share a board; tip {n}: keep tasks short.",
            )
        evidence, _ = record_turn(
            conn,
            settings,
            session_id=session.id,
            user_id=OWNER,
            user_text="I keep my tasks in a shared spreadsheet so my team can organize and share them.",
            answer_text="Good idea.",
        )
        asked = "Can you help me organize my tasks so I can easily share them with others?"
        assert evidence in [r.id for r in retrieve_context(conn, settings, user_id=OWNER, query=asked)]
        # Someone named: the same (in a conversation between people each name is in hundreds of turns).
        named = "How does Tom organize tasks to share them?"
        assert evidence in [r.id for r in retrieve_context(conn, settings, user_id=OWNER, query=named)]
        # About nobody ("me" alone is small talk's: "tell me a joke"): nothing.
        assert retrieve_context(conn, settings, user_id=OWNER, query="Can you organize tasks to share them?") == []
        assert retrieve_context(conn, settings, user_id=OWNER, query="tell me another joke about tasks") == []
        # The mechanism removed: the floor lets nothing through for the request either.
        monkeypatch.setattr(relevance, "PERSONAL_TERMS", 10**6)
        assert retrieve_context(conn, settings, user_id=OWNER, query=asked) == []


RENOVATION = (
    "Great question! Here is a plan for the whole renovation, room by room.\n"
    + "\n".join(
        f"## Phase {n}\nMeasure twice, order materials early, and book the trades a month ahead." for n in range(1, 25)
    )
    + "\n## Finishes\nWhich colour for the kitchen tiles is going to be your call: sage green, terracotta or white."
)  # ~2,200 characters: every word of the question below, near the end


def test_a_long_answer_holding_every_word_late_does_not_outrank_the_turn_that_says_it(counted):
    settings, conn = counted
    session = store.open_session(conn, "telegram", OWNER, OWNER, "private")
    said, _ = record_turn(
        conn,
        settings,
        session_id=session.id,
        user_id=OWNER,
        user_text="The colour for the kitchen tiles: sage green.",
        answer_text="Lovely choice.",
    )
    record_turn(
        conn,
        settings,
        session_id=session.id,
        user_id=OWNER,
        user_text="Any tips for the renovation?",
        answer_text=RENOVATION,
    )

    found = retrieval.search_messages(
        conn, settings, user_id=OWNER, query="Which colour are the kitchen tiles going to be?", limit=3
    )

    # The share of the question's words a message says itself is read in its opening (as long as
    # a turn between people): the answer's Markdown holds them all, far down.
    assert found[0].id == said
