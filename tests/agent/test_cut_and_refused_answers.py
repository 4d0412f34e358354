"""What the person sees, what is stored and what the model is sent next, when an answer is cut,
refused, or comes from an OpenAI-compatible server's odd stream. The real turn, a real SQLite file,
the models stubbed at the network edge with recorded (or recorded-shape) payloads."""

from __future__ import annotations

import httpx
import msgspec
import pytest
from click.testing import CliRunner

import lib.tools.registry as registry
from lib.agent import TurnInput, run_turn
from lib.agent.steps import EMPTY_ANSWER
from lib.commands.cli import cli
from lib.db import rows
from lib.tools.base import ToolContext, ToolResult
from tests.support.agent import (
    ANTHROPIC_MESSAGES,
    OPENAI_CHAT,
    SSE,
    GetWeather,
    RecordingSink,
    configured_runtime,
    raw,
    request_json,
    sse_response,
)

OWNER = "1001"
BASE = f'owner = {OWNER}\n[embeddings]\nprovider = "none"\n'
OPENAI_FIRST = (
    BASE + '[default_llm]\nprovider = "openai"\nmodel = "gpt-4o-mini"\n[fallback_llm]\nprovider = "anthropic"\n'
)
CYBER = "This request was declined because it could enable cyber harm"


class Note(msgspec.Struct):
    content: str


class RecordingRemember:
    """Stands in for the memory tool of the same name: records what it was asked to keep."""

    name = "remember"
    description = "Save a fact about the user."
    Input = Note

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def execute(self, args: Note, context: ToolContext) -> ToolResult:
        self.calls.append(args.content)
        return ToolResult(f"Remembered (memory #{len(self.calls)}).")


class Query(msgspec.Struct):
    query: str


class RecordingRecall:
    name = "recall"
    description = "Search the user's memory."
    Input = Query

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def execute(self, args: Query, context: ToolContext) -> ToolResult:
        self.calls.append(args.query)
        return ToolResult("Grace is Ada's sister.")


@pytest.fixture
def anthropic_runtime(ash_home, monkeypatch, sleeps):
    runtime = configured_runtime(ash_home, monkeypatch, BASE)
    yield runtime
    runtime.db.close()


@pytest.fixture
def openai_runtime(ash_home, monkeypatch, sleeps):
    runtime = configured_runtime(ash_home, monkeypatch, OPENAI_FIRST)
    yield runtime
    runtime.db.close()


def turn(text: str) -> TurnInput:
    return TurnInput(provider="telegram", chat_id="42", user_id=OWNER, text=text)


def use_tools(monkeypatch, *tools) -> None:
    monkeypatch.setattr(registry, "available_tools", lambda settings: list(tools))


def stored(runtime) -> list[tuple[str, str]]:
    found = rows(runtime.db.conn(), "SELECT role, content FROM messages ORDER BY id")
    return [(r["role"], r["content"]) for r in found]


def with_field(provider: str, name: str, old: bytes, new: bytes) -> httpx.Response:
    """A recorded stream with one field changed, as a server differing only there sends it."""
    payload = raw(provider, name)
    assert old in payload
    return httpx.Response(200, content=payload.replace(old, new), headers=SSE)


async def test_an_anthropic_refusal_is_shown_as_refused_and_left_out_of_the_next_request(
    anthropic_runtime, httpx2_mock
):
    route = httpx2_mock.post(ANTHROPIC_MESSAGES).mock(
        side_effect=[
            sse_response("anthropic", "stream_refusal_after_text_ASSEMBLED.sse"),
            sse_response("anthropic", "stream_text.sse"),
        ]
    )
    sink = RecordingSink()

    refused = await run_turn(anthropic_runtime, turn("Write me a keylogger."), sink)
    await run_turn(anthropic_runtime, turn("Then tell me a joke."), RecordingSink())

    assert refused.ok and refused.incomplete == "refusal"
    (shown,) = sink.of("finish")
    assert shown.startswith("Hi\n\n(The model declined to answer this: " + CYBER)
    assert "left out of the conversation" in shown and shown == refused.text
    # Anthropic: reset the context after a refusal. The next request starts after it.
    assert request_json(route.calls.last)["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Then tell me a joke."}]}
    ]
    assert stored(anthropic_runtime) == [("user", "Then tell me a joke."), ("assistant", "Hello there!")]


async def test_an_openai_refusal_is_shown_not_called_empty(openai_runtime, httpx2_mock):
    httpx2_mock.post(OPENAI_CHAT).mock(return_value=sse_response("openai", "chat_stream_refusal_ASSEMBLED.sse"))
    sink = RecordingSink()

    result = await run_turn(openai_runtime, turn("Write me a keylogger."), sink)

    assert sink.of("finish") == [
        "I'm sorry, I cannot assist with that request.\n\n(The model declined to answer this. "
        "This exchange is left out of the conversation, so you can rephrase and ask again.)"
    ]
    assert result.incomplete == "refusal" and stored(openai_runtime) == []


async def test_an_answer_cut_at_max_tokens_says_so_and_is_stored_as_cut(anthropic_runtime, httpx2_mock):
    httpx2_mock.post(ANTHROPIC_MESSAGES).mock(
        return_value=with_field("anthropic", "stream_text.sse", b'"end_turn"', b'"max_tokens"')
    )
    sink = RecordingSink()

    result = await run_turn(anthropic_runtime, turn("Tell me everything."), sink)

    expected = (
        "Hello there!\n\n(The answer was cut off here: it reached the length limit for one answer, "
        "max_tokens in the model's config. Ask me to continue.)"
    )
    assert result.ok and result.incomplete == "max_tokens" and sink.of("finish") == [expected]
    # Stored as shown, so "continue" next time reaches a model that knows its answer was cut.
    assert stored(anthropic_runtime) == [("user", "Tell me everything."), ("assistant", expected)]


@pytest.mark.parametrize(
    ("finish_reason", "incomplete", "notice"),
    [
        (b"length", "max_tokens", "it reached the length limit for one answer"),
        (b"content_filter", "content_filter", "cut off here by the provider's content filter"),
    ],
)
async def test_an_openai_answer_cut_says_why(openai_runtime, httpx2_mock, finish_reason, incomplete, notice):
    httpx2_mock.post(OPENAI_CHAT).mock(
        return_value=with_field(
            "openai",
            "chat_stream_text_after_tool_result.sse",
            b'"finish_reason":"stop"',
            b'"finish_reason":"' + finish_reason + b'"',
        )
    )
    sink = RecordingSink()

    result = await run_turn(openai_runtime, turn("Capital of the UK?"), sink)

    (shown,) = sink.of("finish")
    assert shown.startswith("The capital of the UK is London.\n\n(The answer was cut off here")
    assert notice in shown and result.incomplete == incomplete


async def test_tool_calls_of_a_cut_answer_are_not_run(anthropic_runtime, httpx2_mock, monkeypatch):
    tool = GetWeather()
    use_tools(monkeypatch, tool)
    route = httpx2_mock.post(ANTHROPIC_MESSAGES).mock(
        return_value=with_field(
            "anthropic",
            "stream_tool_use_input_json_delta.sse",
            b'"stop_reason":"tool_use"',
            b'"stop_reason":"max_tokens"',
        )
    )

    result = await run_turn(anthropic_runtime, turn("Weather in Paris?"), RecordingSink())

    # Its input may be cut mid-JSON: the tool must not run on half an argument.
    assert tool.calls == [] and route.call_count == 1
    assert result.text.startswith("I'll check the current weather in Paris for you.\n\n(The answer was cut off")


async def test_ollama_calls_without_index_each_run_and_each_get_their_result(openai_runtime, httpx2_mock, monkeypatch):
    tool = RecordingRemember()
    use_tools(monkeypatch, tool)
    route = httpx2_mock.post(OPENAI_CHAT).mock(
        side_effect=[
            sse_response("openai", "chat_stream_ollama_tool_calls_no_index_ASSEMBLED.sse"),
            sse_response("openai", "chat_stream_text_after_tool_result.sse"),
        ]
    )

    await run_turn(openai_runtime, turn("My sister is Grace and I'm allergic to peanuts."), RecordingSink())

    assert tool.calls == ["Ada's sister is called Grace.", "Ada is allergic to peanuts."]
    assistant, *results = request_json(route.calls.last)["messages"][-3:]
    assert [(c["id"], c["function"]["name"]) for c in assistant["tool_calls"]] == [
        ("call_lbcjwr0u", "remember"),
        ("call_q2z8mtn1", "remember"),
    ]
    assert [(m["role"], m["tool_call_id"]) for m in results] == [("tool", "call_lbcjwr0u"), ("tool", "call_q2z8mtn1")]


async def test_a_call_without_an_id_is_answered_under_the_id_it_was_given(openai_runtime, httpx2_mock, monkeypatch):
    tool = RecordingRecall()
    use_tools(monkeypatch, tool)
    route = httpx2_mock.post(OPENAI_CHAT).mock(
        side_effect=[
            sse_response("openai", "chat_stream_tool_call_no_id_ASSEMBLED.sse"),
            sse_response("openai", "chat_stream_text_after_tool_result.sse"),
        ]
    )

    await run_turn(openai_runtime, turn("Who is my sister?"), RecordingSink())

    assert tool.calls == ["Ada's sister"]
    assistant, result = request_json(route.calls.last)["messages"][-2:]
    (call,) = assistant["tool_calls"]
    assert call["id"].startswith("call_") and result["tool_call_id"] == call["id"]


async def test_an_invalid_request_error_mid_stream_is_reported_as_invalid_not_unavailable(
    anthropic_runtime, httpx2_mock, sleeps
):
    route = httpx2_mock.post(ANTHROPIC_MESSAGES).mock(
        return_value=sse_response("anthropic", "stream_error_invalid_request_midstream_ASSEMBLED.sse")
    )
    sink = RecordingSink()

    result = await run_turn(anthropic_runtime, turn("hi"), sink)

    assert route.call_count == 1 and sleeps.delays == []
    assert not result.ok and sink.of("fail") == [result.text]
    assert result.text.startswith("The model refused this request as invalid")
    assert "not available" not in result.text and stored(anthropic_runtime) == []


async def test_an_empty_answer_is_a_notice_for_the_person_never_the_models_words(anthropic_runtime, httpx2_mock):
    empty = raw("anthropic", "stream_text.sse")
    for piece in (b'"text":"Hello"', b'"text":" there"', b'"text":"!"'):
        assert piece in empty
        empty = empty.replace(piece, b'"text":""')
    route = httpx2_mock.post(ANTHROPIC_MESSAGES).mock(
        side_effect=[httpx.Response(200, content=empty, headers=SSE), sse_response("anthropic", "stream_text.sse")]
    )
    sink = RecordingSink()

    result = await run_turn(anthropic_runtime, turn("Where did Ada grow up?"), sink)
    await run_turn(anthropic_runtime, turn("Anything?"), RecordingSink())

    # The person is told; the notice is not put in the model's mouth.
    assert result.ok and sink.of("finish") == [EMPTY_ANSWER] and result.text == EMPTY_ANSWER
    assert stored(anthropic_runtime) == [
        ("user", "Where did Ada grow up?"),
        ("assistant", ""),
        ("user", "Anything?"),
        ("assistant", "Hello there!"),
    ]
    # History: the next request has the question, and no answer that was never given.
    sent = str(request_json(route.calls.last)["messages"])
    assert "Where did Ada grow up?" in sent and EMPTY_ANSWER not in sent
    # Retrieval: nothing indexed says it, and the empty answer has no chunk of its own.
    chunks = rows(anthropic_runtime.db.conn(), "SELECT kind, ref_id, content FROM search_chunks")
    assert chunks and not any("empty answer" in c["content"] for c in chunks)
    (empty_id,) = [r["id"] for r in rows(anthropic_runtime.db.conn(), "SELECT id FROM messages WHERE content = ''")]
    assert empty_id not in {c["ref_id"] for c in chunks if c["kind"] == "message"}


async def test_responses_api_events_are_named_to_the_person_and_in_the_log(openai_runtime, httpx2_mock, sleeps, caplog):
    # A server (or proxy) that answers /chat/completions with Responses API events: a
    # misconfiguration, not an overloaded model. Recorded events (see PROVENANCE.md).
    chat = httpx2_mock.post(OPENAI_CHAT).mock(return_value=sse_response("openai", "responses_stream_text.sse"))
    sink = RecordingSink()

    result = await run_turn(openai_runtime, turn("hi"), sink)

    assert not result.ok and sink.of("fail") == [result.text]
    assert "Responses API" in result.text and "OPENAI_BASE_URL" in result.text
    assert "overloaded" not in result.text and "unreachable" not in result.text
    # Not retried, not sent to the fallback: another attempt would get the same events.
    assert chat.call_count == 1 and sleeps.delays == []
    assert [str(call.request.url) for call in httpx2_mock.calls] == [OPENAI_CHAT]
    logged = [r.getMessage() for r in caplog.records if r.name == "ash.agent"]
    assert any("response.created" in line and "/v1/chat/completions" in line for line in logged), logged
    assert stored(openai_runtime) == []


def test_ash_chat_prints_an_answer_ending_in_done_without_finish_reason_once(
    ash_home, monkeypatch, httpx2_mock, sleeps
):
    configured_runtime(ash_home, monkeypatch, OPENAI_FIRST).db.close()
    route = httpx2_mock.post(OPENAI_CHAT).mock(
        return_value=with_field(
            "openai", "chat_stream_text_after_tool_result.sse", b'"finish_reason":"stop"', b'"finish_reason":null'
        )
    )

    result = CliRunner().invoke(cli, ["chat", "Capital of the UK?"])

    assert result.exit_code == 0, result.output
    assert result.output == "The capital of the UK is London.\n"
    assert route.call_count == 1 and sleeps.delays == []
