"""A person's standing instructions (lib/memory/standing.py) reach every prompt of theirs: a later
question they govern shares no word with them, so retrieval alone leaves them out. Real SQLite
file with every migration, the real write path, full-text ranking alone (embeddings off)."""

from __future__ import annotations

import pytest

import lib.memory.api as memory_api
from lib.agent import TurnInput, run_turn
from lib.agent.prompt import build_system_prompt
from lib.memory import knowledge, provenance, standing, store
from lib.memory.api import retrieve_context
from lib.memory.search import index
from tests.support.agent import ANTHROPIC_MESSAGES, RecordingSink, configured_runtime, request_json, sse_response

OWNER = "42"
RULE = "Always confirm exact dates when I ask about deadlines or meetings."
QUESTION = "When is the non-provisional patent filing scheduled?"


def say(conn, settings, texts: list[str], *, owner: str = OWNER, chat: str = "c", metadata=None) -> list[int]:
    session = store.open_session(conn, "telegram", chat, owner, "private")
    ids = [store.add_message(conn, session.id, owner, "user", text, metadata=metadata) for text in texts]
    index.index_messages(conn, settings, ids)
    return ids


def test_a_standing_instruction_reaches_the_prompt_of_a_question_it_shares_no_word_with(db, monkeypatch):
    settings, conn = db
    (rule,) = say(conn, settings, [RULE])
    (filing,) = say(conn, settings, ["I plan to do the non-provisional patent filing on 3 March."], chat="d")

    found = retrieve_context(conn, settings, user_id=OWNER, query=QUESTION)
    assert [r.id for r in found][:2] == [rule, filing]
    assert found[0].metadata["standing"] is True
    # The mechanism removed: retrieval finds the filing turn, not the instruction.
    monkeypatch.setattr(memory_api, "standing_instructions", lambda conn, owner: [])
    assert rule not in [r.id for r in retrieve_context(conn, settings, user_id=OWNER, query=QUESTION)]


def test_a_message_without_words_still_gets_them_and_a_zero_budget_nothing(db):
    settings, conn = db
    (rule,) = say(conn, settings, [RULE])

    assert [r.id for r in retrieve_context(conn, settings, user_id=OWNER, query="  ")] == [rule]
    assert retrieve_context(conn, settings, user_id=OWNER, query=QUESTION, token_budget=0) == []


def test_the_prompt_gives_them_a_section_of_their_own_outside_memory(db):
    settings, conn = db
    say(conn, settings, [RULE])
    say(conn, settings, ["I plan to do the non-provisional patent filing on 3 March."], chat="d")
    found = retrieve_context(conn, settings, user_id=OWNER, query=QUESTION)

    system = build_system_prompt(settings, TurnInput("telegram", OWNER, OWNER, QUESTION), profile=None, retrieved=found)

    instructions, memory = system.split("## Standing instructions from")[1].split("## What you remember")
    assert RULE in instructions and "<standing>" in instructions
    assert RULE not in memory and "patent filing on 3 March" in memory


async def test_a_turn_follows_an_instruction_given_in_another_chat_and_why_lists_it(ash_home, monkeypatch, httpx2_mock):
    runtime = configured_runtime(ash_home, monkeypatch, f'owner = {OWNER}\n[embeddings]\nprovider = "none"\n')
    conn = runtime.db.conn()
    (rule,) = say(conn, runtime.settings, [RULE], chat="7")  # another private chat: not in this one's history
    route = httpx2_mock.post(ANTHROPIC_MESSAGES).mock(return_value=sse_response("anthropic", "stream_text.sse"))

    await run_turn(runtime, TurnInput("telegram", "42", OWNER, QUESTION), RecordingSink())

    system = request_json(route.calls[0])["system"]
    system = system if isinstance(system, str) else "".join(part["text"] for part in system)
    assert RULE in system.split("## Standing instructions from")[1]
    answer = provenance.find(conn, provider="telegram", chat_id="42", user_id=OWNER)
    assert [(s.kind, s.ref_id) for s in provenance.sources(conn, answer.id)] == [("message", rule)]
    runtime.db.close()


def test_only_the_newest_are_given_and_each_once(db):
    settings, conn = db
    ids = say(
        conn, settings, [f"Always add {n} emoji when I ask about lunch." for n in range(standing.STANDING_MAX + 3)]
    )
    say(conn, settings, ["Please book a table for two.", "Always happy to help when I can."], chat="d")

    found = retrieve_context(conn, settings, user_id=OWNER, query="Always add emoji when I ask about lunch?")
    given = [r.id for r in found if r.metadata.get("standing")]
    assert given == ids[::-1][: standing.STANDING_MAX]
    assert len({r.id for r in found}) == len(found)


def test_they_take_at_most_half_the_token_budget(db):
    settings, conn = db
    long_rule = "Always {n} list every step, the tools, the costs and the risks when I ask about repairs. " * 4
    say(conn, settings, [long_rule.format(n=n)[:490] for n in range(standing.STANDING_MAX)])
    (fix,) = say(conn, settings, ["The boiler repair is booked for Friday with Jonas."], chat="d")

    found = retrieve_context(conn, settings, user_id=OWNER, query="When is the boiler repair?", token_budget=600)
    given = [r for r in found if r.metadata.get("standing")]
    assert 0 < len(given) < standing.STANDING_MAX
    assert sum(r.token_count for r in given) <= 300
    assert fix in [r.id for r in found]


def test_not_from_a_groups_memory_nor_from_someone_elses_words(db):
    settings, conn = db
    say(conn, settings, [RULE], owner="chat:-100123", chat="-100123")
    say(conn, settings, [RULE], metadata={store.ORIGIN_OUTSIDE: ["forwarded from Dana"]})

    assert standing.standing_instructions(conn, "chat:-100123") == []
    assert standing.standing_instructions(conn, OWNER) == []


def test_the_query_reads_the_partial_index_not_every_message(db):
    _, conn = db
    plan = " ".join(str(row) for row in conn.execute("EXPLAIN QUERY PLAN " + standing.CANDIDATES_SQL, (OWNER, 10)))
    assert "messages_standing" in plan


@pytest.mark.parametrize(
    ("text", "is_one"),
    [
        (RULE, True),
        ("always format dates as MM/DD/YYYY whenever I ask about scheduling", True),
        ("Please always answer in French if I write in French.", True),
        ("From now on, keep answers under five lines.", True),
        ("Never suggest recipes with nuts when I ask for dinner ideas.", True),
        ("Always happy to help. Well, I have to go! Bye!", False),
        ("Always happy to help when I can.", False),
        ("Never mind, I'll ask again when I get home.", False),
        ("Please book a table for two.", False),
        ("I always run when I can.", False),
        ("Always confirm dates when I ask. " + "x" * 500, False),
    ],
)
def test_what_counts_as_a_standing_instruction(text, is_one):
    assert standing.is_standing_instruction(text) is is_one


def test_memory_lists_them_so_the_person_can_see_what_ash_follows(db):
    settings, conn = db
    say(conn, settings, [RULE, "Please book a table for two."])

    text = knowledge.describe_user(conn, settings, OWNER)

    assert "Standing instructions" in text.split("\n\n")[-1]
    assert RULE in text and "book a table" not in text
