"""`recall` brings what the model does not have yet (lib/memory/api.py recall).

A question that gathers things from many conversations ("which trips did I take?") gets the
best few of them in the prompt's memory section. When the model then calls `recall`, the same
best few came back again: a call that added nothing. Now the past messages the model already
reads (the memory section, the conversation window, earlier calls' results) are left out, so
each call brings others. Real turns over a real SQLite file, the model stubbed at the network
edge with a recorded tool-use response whose calls are `recall`s."""

from __future__ import annotations

import dataclasses
import functools
import json
import re

import httpx
import pytest

from lib.agent import TurnInput, run_turn
from lib.agent.pending import TurnState, decode_state, encode_state
from lib.agent.prompt import MORE_IN_MEMORY, build_system_prompt
from lib.db import rows
from lib.memory import api as memory_api
from lib.memory import knowledge, provenance, store
from lib.memory.types import SearchResult
from lib.tools.base import ToolContext
from lib.tools.memory_tools import RECALL_LIMIT, Recall
from tests.support.agent import (
    ANTHROPIC_MESSAGES,
    SSE,
    RecordingSink,
    configured_runtime,
    request_json,
    sse_response,
    tool_calls,
)
from tests.support.memory_retrieval import turn as past_turn

USER = "1001"
QUIET = '[embeddings]\nprovider = "none"\n[memory]\nextraction_enabled = false\n'
# One past conversation each: more trips than the prompt and one recall call hold together.
PLACES = [
    "Lisbon", "Oslo", "Kyoto", "Quito", "Hanoi", "Dakar", "Tallinn", "Cusco", "Porto", "Bergen",
    "Nara", "Sucre", "Hue", "Accra", "Riga", "Arequipa", "Braga", "Tromso", "Osaka", "Cuenca",
    "Dalat", "Kumasi", "Vilnius", "Puno", "Evora", "Alesund", "Kobe", "Loja", "Sapa", "Tamale",
]  # fmt: skip
QUESTION = "Which trips did I love every day of?"


@pytest.fixture
def runtime(ash_home, db_path, monkeypatch):
    return with_trips(configured_runtime(ash_home, monkeypatch, QUIET, openai=False))


def with_trips(runtime):
    """One past conversation for each place."""
    conn = runtime.db.conn()
    for place in PLACES:
        said = f"Back from my trip to {place}: I loved every day of that trip."
        past_turn(conn, runtime.settings, USER, said, "Welcome back!")
        store.close_session(conn, "telegram", USER)
    return runtime


def places_in(text: str) -> set[str]:
    return {place for place in PLACES if re.search(rf"\b{place}\b", text)}


def recalls(*queries: str) -> httpx.Response:
    """The model's answer: one `recall` call for each of `queries`."""
    content = tool_calls(*(("recall", {"query": query}) for query in queries))
    return httpx.Response(200, content=content, headers=SSE)


async def test_each_recall_call_brings_past_messages_the_model_does_not_have_yet(runtime, httpx2_mock):
    route = httpx2_mock.post(ANTHROPIC_MESSAGES).mock(
        side_effect=[recalls("trip", "trip"), sse_response("anthropic", "stream_text.sse")]
    )

    await run_turn(runtime, TurnInput("telegram", USER, USER, QUESTION), RecordingSink())

    first, second = (request_json(call) for call in route.calls)
    in_prompt = places_in(json.dumps(first["system"]))
    one, two = (places_in(result["content"]) for result in second["messages"][-1]["content"])
    assert in_prompt and len(one) >= RECALL_LIMIT - 1 and len(two) >= RECALL_LIMIT - 1
    # Neither call repeats the memory section, and the second does not repeat the first.
    assert not one & in_prompt and not two & in_prompt and not one & two


async def test_a_call_that_finds_only_what_the_model_has_says_so(runtime, httpx2_mock):
    context = ToolContext(user_id=USER, chat_id=USER, session_id=None, settings=runtime.settings, db=runtime.db)
    everything = await Recall().execute(Recall.Input(query="Kyoto"), context)
    assert "Kyoto" in everything.output and everything.metadata["messages"]

    seen = frozenset(everything.metadata["messages"])
    again = await Recall().execute(Recall.Input(query="Kyoto"), dataclasses.replace(context, seen_messages=seen))
    assert "Kyoto" not in again.output  # the trip and the answer to it, both seen
    assert again.output.startswith("Nothing more in memory for that: what matches (2 past messages) is already")
    assert not again.metadata


def test_knowledge_entries_come_back_even_when_seen_messages_are_left_out(runtime):
    conn = runtime.db.conn()
    entry = knowledge.add(conn, runtime.settings, "Favourite trip so far: Kyoto in spring.", owner_user_id=USER)
    found, _ = memory_api.recall(
        conn, runtime.settings, user_id=USER, query="Kyoto trip", limit=RECALL_LIMIT, seen=frozenset()
    )
    messages = frozenset(r.id for r in found if r.source_type == "message")
    again, left_out = memory_api.recall(
        conn, runtime.settings, user_id=USER, query="Kyoto trip", limit=RECALL_LIMIT, seen=messages
    )
    assert entry in {r.id for r in again if r.source_type == "knowledge"}
    assert not {r.id for r in again if r.source_type == "message"} & messages and left_out == len(messages)


def test_a_parked_turn_keeps_what_the_model_has_seen(runtime):
    state = TurnState(
        turn=TurnInput("telegram", USER, USER, QUESTION),
        session_id=1,
        system="",
        preset=None,
        messages=[],
        step=1,
        done=[],
        outside=[],
        own_words=QUESTION,
        uses=[],
        results=[],
        seen_messages=[4, 8, 15],
    )
    assert decode_state(encode_state(state)).seen_messages == [4, 8, 15]
    # A turn parked before there was such a list resumes with none.
    older = json.loads(encode_state(state))
    del older["seen_messages"]
    assert decode_state(json.dumps(older)).seen_messages == []


async def test_recall_leaves_out_the_conversation_the_model_is_reading(runtime, httpx2_mock):
    route = httpx2_mock.post(ANTHROPIC_MESSAGES).mock(
        side_effect=[
            sse_response("anthropic", "stream_text.sse"),
            recalls("Zanzibar"),
            sse_response("anthropic", "stream_text.sse"),
        ]
    )
    said = "Back from my trip to Zanzibar: I loved every day of that trip."
    await run_turn(runtime, TurnInput("telegram", USER, USER, said), RecordingSink())

    await run_turn(runtime, TurnInput("telegram", USER, USER, "Where was I just now?"), RecordingSink())

    last = request_json(route.calls.last)
    assert said in json.dumps(last["messages"][0])  # the window holds it ...
    recalled = last["messages"][-1]["content"][0]["content"]
    assert "Nothing more in memory for that" in recalled and "Zanzibar" not in recalled  # ... so not again


async def test_the_prompt_says_when_memory_holds_more_than_it_shows(ash_home, db_path, monkeypatch, httpx2_mock):
    # A budget for three or four of the thirty trips: the rest passed the floor and was cut.
    small = configured_runtime(ash_home, monkeypatch, QUIET + "retrieval_token_budget = 60\n", openai=False)
    runtime = with_trips(small)
    route = httpx2_mock.post(ANTHROPIC_MESSAGES).mock(return_value=sse_response("anthropic", "stream_text.sse"))

    await run_turn(runtime, TurnInput("telegram", USER, USER, QUESTION), RecordingSink())
    system = request_json(route.calls.last)["system"]
    assert 0 < len(places_in(system)) < 10 and MORE_IN_MEMORY in system

    # Everything that matches is shown: nothing to say.
    await run_turn(runtime, TurnInput("telegram", USER, USER, "How was Kyoto?"), RecordingSink())
    system = request_json(route.calls.last)["system"]
    assert places_in(system) == {"Kyoto"} and MORE_IN_MEMORY not in system


def test_the_prompt_points_to_recall_only_when_the_turn_offers_it(runtime):
    item = SearchResult(1, "Back from my trip to Kyoto.", 1.0, "message", {})
    turn = TurnInput("telegram", USER, USER, QUESTION)
    ask = functools.partial(build_system_prompt, runtime.settings, turn, profile=None, retrieved=[item])
    assert MORE_IN_MEMORY in ask(tools=[("recall", "Search memory.")], more_in_memory=True)
    assert MORE_IN_MEMORY not in ask(tools=[("web_search", "Search the web.")], more_in_memory=True)
    assert MORE_IN_MEMORY not in ask(tools=[("recall", "Search memory.")], more_in_memory=False)


def test_more_than_the_prompt_holds_is_told_apart_from_all_of_it(runtime):
    conn = runtime.db.conn()
    # A dozen trips named: each turn and its answer pass the floor, more than the 20 items shown.
    dozen = memory_api.retrieve_for_prompt(conn, runtime.settings, user_id=USER, query=" ".join(PLACES[:12]))
    assert len(dozen.items) == memory_api.RETRIEVAL_CANDIDATES and dozen.more
    few = memory_api.retrieve_for_prompt(conn, runtime.settings, user_id=USER, query=" ".join(PLACES[:3]))
    assert places_in(" ".join(r.content for r in few.items)) == set(PLACES[:3]) and not few.more


async def test_a_message_the_prompt_shows_in_part_comes_back_whole(runtime, httpx2_mock):
    conn = runtime.db.conn()
    packing = "Packing list for Zanzibar: " + " ".join(f"item{i} sunscreen snorkel" for i in range(60))
    past_turn(conn, runtime.settings, USER, packing)
    store.close_session(conn, "telegram", USER)
    route = httpx2_mock.post(ANTHROPIC_MESSAGES).mock(
        side_effect=[recalls("Zanzibar packing list"), sse_response("anthropic", "stream_text.sse")]
    )

    await run_turn(runtime, TurnInput("telegram", USER, USER, "What was on my Zanzibar packing list?"), RecordingSink())

    first, second = (request_json(call) for call in route.calls)
    assert "Packing list for Zanzibar" in first["system"] and "item59" not in first["system"]  # a part
    assert "item59 sunscreen snorkel" in second["messages"][-1]["content"][0]["content"]  # ... then whole


@dataclasses.dataclass
class SourcesSink(RecordingSink):
    """A sink with the 🧠 button's hook: the counts it was given, in order."""

    counts: list[tuple[int, int]] = dataclasses.field(default_factory=list)

    def sources(self, sources_id: int, count: int) -> None:
        self.counts.append((sources_id, count))


async def test_why_lists_what_recall_found_besides_the_prompt(runtime, httpx2_mock):
    route = httpx2_mock.post(ANTHROPIC_MESSAGES).mock(
        side_effect=[recalls("trip", "trip"), sse_response("anthropic", "stream_text.sse")]
    )
    sink = SourcesSink()

    await run_turn(runtime, TurnInput("telegram", USER, USER, QUESTION), sink)

    (answer, in_prompt), *_, (same, in_all) = sink.counts
    assert same == answer and in_all == in_prompt + 2 * RECALL_LIMIT  # the button counts them too
    items = provenance.sources(runtime.db.conn(), answer)
    assert len(items) == in_all and [i.rank for i in items] == list(range(in_all))
    ids = [i.ref_id for i in items if i.kind == "message"]
    said = " ".join(
        r["content"]
        for r in rows(
            runtime.db.conn(),
            "SELECT content FROM messages WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(ids),),
        )
    )
    recalled = " ".join(r["content"] for r in request_json(route.calls.last)["messages"][-1]["content"])
    assert places_in(recalled) and places_in(recalled) <= places_in(said)
