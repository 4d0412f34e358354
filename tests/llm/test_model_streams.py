"""Model streams as the providers and compatible servers really send them, read through the router:
tool-call deltas without (or with reused) indexes, repeated names, missing ids, streams that end
without a finish_reason, cut and refused answers, and errors sent inside a stream."""

from __future__ import annotations

import json

import httpx
import pytest

from lib.errors import LLMError, user_message
from lib.llm.router import Router
from lib.llm.types import Message, Response
from tests.support.agent import (
    ANTHROPIC_MESSAGES,
    OPENAI_CHAT,
    SSE,
    body,
    configured_runtime,
    raw,
    sse_response,
)

NO_EMBEDDINGS = '[embeddings]\nprovider = "none"\n'
OPENAI_FIRST = NO_EMBEDDINGS + '[default_llm]\nprovider = "openai"\nmodel = "gpt-4o-mini"\n'
SISTER = {"content": "Ada's sister is called Grace."}
PEANUTS = {"content": "Ada is allergic to peanuts."}


@pytest.fixture
def openai_runtime(ash_home, monkeypatch, sleeps):
    """OpenAI (or a compatible server) first, Anthropic as the fallback."""
    runtime = configured_runtime(ash_home, monkeypatch, OPENAI_FIRST + '[fallback_llm]\nprovider = "anthropic"\n')
    yield runtime
    runtime.db.close()


@pytest.fixture
def anthropic_runtime(ash_home, monkeypatch, sleeps):
    """Anthropic first, OpenAI as the fallback (the default order)."""
    runtime = configured_runtime(ash_home, monkeypatch, NO_EMBEDDINGS)
    yield runtime
    runtime.db.close()


def recorded(provider: str, name: str, *replacements: tuple[bytes, bytes]) -> httpx.Response:
    """A recorded stream with single fields changed, as a server differing only there sends it."""
    payload = raw(provider, name)
    for old, new in replacements:
        assert old in payload
        payload = payload.replace(old, new)
    return httpx.Response(200, content=payload, headers=SSE)


async def stream(runtime) -> tuple[Response, list[str]]:
    """One streamed call through the router; returns the response and what was shown meanwhile."""
    shown: list[str] = []

    async def on_text(text: str) -> None:
        shown.append(text)

    async def on_restart() -> None:
        shown.append("<restarted>")

    async with Router(runtime.settings, runtime.llm_providers) as router:
        response = await router.stream(
            system="s", messages=(Message.user_text("hi"),), on_text=on_text, on_restart=on_restart
        )
    return response, shown


def calls(response: Response) -> list[tuple[str, str, dict]]:
    return [(use.id, use.name, use.input) for use in response.tool_uses]


@pytest.mark.parametrize(
    "fixture",
    [
        "chat_stream_ollama_tool_calls_no_index_ASSEMBLED.sse",
        "chat_stream_ollama_tool_calls_index_0_ASSEMBLED.sse",
        "chat_stream_tool_calls_mixed_index_ASSEMBLED.sse",
    ],
)
async def test_two_calls_stay_two_calls_however_the_server_numbers_them(openai_runtime, httpx2_mock, fixture):
    httpx2_mock.post(OPENAI_CHAT).mock(return_value=sse_response("openai", fixture))

    response, _ = await stream(openai_runtime)

    assert calls(response) == [("call_lbcjwr0u", "remember", SISTER), ("call_q2z8mtn1", "remember", PEANUTS)]
    assert response.stop_reason == "tool_use"


async def test_a_name_repeated_in_every_chunk_is_not_doubled(openai_runtime, httpx2_mock):
    httpx2_mock.post(OPENAI_CHAT).mock(
        return_value=sse_response("openai", "chat_stream_tool_call_name_in_every_chunk_ASSEMBLED.sse")
    )

    response, _ = await stream(openai_runtime)

    assert calls(response) == [("call_ZR5UUuTt3pf61kjwAJIYdVMj", "recall", {"query": "Ada's sister"})]


@pytest.mark.parametrize("without_index", [False, True])
async def test_arguments_streamed_before_the_name_make_one_named_call(openai_runtime, httpx2_mock, without_index):
    # vercel/ai#14722 and #16507: an empty name first, the arguments, then the call's id and its
    # name. It is one call, not a nameless one plus a named one with no arguments.
    fixture = "chat_stream_tool_call_arguments_before_name_ASSEMBLED.sse"
    response = sse_response("openai", fixture)
    if without_index:
        payload = raw("openai", fixture).replace(b'"tool_calls":[{"index":0,', b'"tool_calls":[{')
        response = httpx.Response(200, content=payload, headers=SSE)
    httpx2_mock.post(OPENAI_CHAT).mock(return_value=response)

    response, _ = await stream(openai_runtime)

    assert calls(response) == [("call_ZR5UUuTt3pf61kjwAJIYdVMj", "get_capital", {"country": "UK"})]
    assert response.stop_reason == "tool_use"


async def test_a_call_without_an_id_gets_one(openai_runtime, httpx2_mock):
    httpx2_mock.post(OPENAI_CHAT).mock(return_value=sse_response("openai", "chat_stream_tool_call_no_id_ASSEMBLED.sse"))

    response, _ = await stream(openai_runtime)

    ((call_id, name, arguments),) = calls(response)
    assert call_id.startswith("call_") and len(call_id) > len("call_")
    assert (name, arguments) == ("recall", {"query": "Ada's sister"})


async def test_done_without_a_finish_reason_is_a_complete_answer(openai_runtime, httpx2_mock, sleeps):
    route = httpx2_mock.post(OPENAI_CHAT).mock(
        return_value=recorded(
            "openai", "chat_stream_text_after_tool_result.sse", (b'"finish_reason":"stop"', b'"finish_reason":null')
        )
    )

    response, shown = await stream(openai_runtime)

    assert route.call_count == 1 and sleeps.delays == []
    assert response.text == "The capital of the UK is London." and response.stop_reason == "end_turn"
    assert "".join(shown) == response.text


async def test_sse_comment_lines_between_chunks_are_skipped(openai_runtime, httpx2_mock):
    # OpenRouter keeps a connection open with SSE comments while the model thinks.
    payload = b": OPENROUTER PROCESSING\n\n" + raw("openai", "chat_stream_text_after_tool_result.sse")
    httpx2_mock.post(OPENAI_CHAT).mock(return_value=httpx.Response(200, content=payload, headers=SSE))

    response, _ = await stream(openai_runtime)

    assert response.text == "The capital of the UK is London." and response.usage.input_tokens == 78


async def test_done_without_a_finish_reason_after_tool_calls_runs_them(openai_runtime, httpx2_mock):
    httpx2_mock.post(OPENAI_CHAT).mock(
        return_value=recorded(
            "openai", "chat_stream_tool_call_deltas.sse", (b'"finish_reason":"tool_calls"', b'"finish_reason":null')
        )
    )

    response, _ = await stream(openai_runtime)

    assert response.stop_reason == "tool_use"
    assert calls(response) == [("call_ZR5UUuTt3pf61kjwAJIYdVMj", "get_capital", {"country": "UK"})]


@pytest.mark.parametrize(
    ("finish_reason", "stop_reason"), [(b"length", "max_tokens"), (b"content_filter", "content_filter")]
)
async def test_cut_answers_say_why(openai_runtime, httpx2_mock, finish_reason, stop_reason):
    httpx2_mock.post(OPENAI_CHAT).mock(
        return_value=recorded(
            "openai",
            "chat_stream_text_after_tool_result.sse",
            (b'"finish_reason":"stop"', b'"finish_reason":"' + finish_reason + b'"'),
        )
    )

    response, _ = await stream(openai_runtime)

    assert response.stop_reason == stop_reason and response.incomplete
    assert response.text == "The capital of the UK is London."


async def test_tool_calls_of_an_answer_cut_at_the_length_limit_are_not_tool_use(openai_runtime, httpx2_mock):
    httpx2_mock.post(OPENAI_CHAT).mock(
        return_value=recorded(
            "openai", "chat_stream_tool_call_deltas.sse", (b'"finish_reason":"tool_calls"', b'"finish_reason":"length"')
        )
    )

    response, _ = await stream(openai_runtime)

    assert response.stop_reason == "max_tokens" and response.incomplete


async def test_an_openai_refusal_is_the_answer_and_marked_refused(openai_runtime, httpx2_mock):
    httpx2_mock.post(OPENAI_CHAT).mock(return_value=sse_response("openai", "chat_stream_refusal_ASSEMBLED.sse"))

    response, shown = await stream(openai_runtime)

    assert response.text == "I'm sorry, I cannot assist with that request."
    assert shown == ["I'm sorry", ", I cannot assist", " with that request."]
    assert response.stop_reason == "refusal" and response.incomplete


async def test_an_error_chunk_inside_an_openai_stream_is_retried(openai_runtime, httpx2_mock, sleeps):
    full = raw("openai", "chat_stream_text_after_tool_result.sse")
    error = {
        "error": {
            "message": "The server had an error while processing your request. Sorry about that!",
            "type": "server_error",
            "param": None,
            "code": None,
        }
    }
    failed = full[: full.index(b"data: ", full.index(b'" UK"'))] + b"data: " + json.dumps(error).encode() + b"\n\n"
    route = httpx2_mock.post(OPENAI_CHAT).mock(
        side_effect=[httpx.Response(200, content=failed, headers=SSE), httpx.Response(200, content=full, headers=SSE)]
    )

    response, shown = await stream(openai_runtime)

    assert route.call_count == 2 and len(sleeps.delays) == 1
    assert "<restarted>" in shown and response.text == "The capital of the UK is London."


async def test_openai_non_streaming_call_without_an_id_or_with_a_refusal(openai_runtime, httpx2_mock):
    completion = json.loads(raw("openai", "chat_completion_tool_calls.json"))
    del completion["choices"][0]["message"]["tool_calls"][0]["id"]
    refused = json.loads(raw("openai", "chat_completion_tool_calls.json"))
    refused["choices"][0]["message"] = {
        "role": "assistant",
        "content": None,
        "refusal": "I'm sorry, I cannot assist with that request.",
    }
    refused["choices"][0]["finish_reason"] = "stop"
    httpx2_mock.post(OPENAI_CHAT).mock(
        side_effect=[httpx.Response(200, json=completion), httpx.Response(200, json=refused)]
    )

    async with Router(openai_runtime.settings, openai_runtime.llm_providers) as router:
        first = await router.complete(system="s", messages=(Message.user_text("hi"),))
        second = await router.complete(system="s", messages=(Message.user_text("hi"),))

    ((call_id, name, _),) = calls(first)
    assert call_id.startswith("call_") and name == "get_current_weather"
    assert second.stop_reason == "refusal" and second.text == "I'm sorry, I cannot assist with that request."


async def test_an_anthropic_refusal_keeps_its_partial_text_and_explanation(anthropic_runtime, httpx2_mock):
    httpx2_mock.post(ANTHROPIC_MESSAGES).mock(
        return_value=sse_response("anthropic", "stream_refusal_after_text_ASSEMBLED.sse")
    )

    response, shown = await stream(anthropic_runtime)

    assert shown == ["Hi"] and response.text == "Hi"
    assert response.stop_reason == "refusal" and response.incomplete
    assert response.stop_explanation == "This request was declined because it could enable cyber harm."


@pytest.mark.parametrize(
    ("api_reason", "stop_reason"),
    [(b"max_tokens", "max_tokens"), (b"model_context_window_exceeded", "context_window")],
)
async def test_anthropic_cut_answers_say_why(anthropic_runtime, httpx2_mock, api_reason, stop_reason):
    httpx2_mock.post(ANTHROPIC_MESSAGES).mock(
        return_value=recorded(
            "anthropic", "stream_text.sse", (b'"stop_reason":"end_turn"', b'"stop_reason":"' + api_reason + b'"')
        )
    )

    response, _ = await stream(anthropic_runtime)

    assert response.stop_reason == stop_reason and response.incomplete and response.text == "Hello there!"


async def test_an_invalid_request_error_event_mid_stream_is_not_retried(anthropic_runtime, httpx2_mock, sleeps):
    route = httpx2_mock.post(ANTHROPIC_MESSAGES).mock(
        return_value=sse_response("anthropic", "stream_error_invalid_request_midstream_ASSEMBLED.sse")
    )
    # No OpenAI route: falling back would fail this test as "not mocked".

    with pytest.raises(LLMError) as caught:
        await stream(anthropic_runtime)

    assert route.call_count == 1 and sleeps.delays == []
    assert caught.value.status == 400 and not caught.value.retryable
    assert "effort level 'xhigh'" in caught.value.message
    assert user_message(caught.value).startswith("The model refused this request as invalid")


async def test_an_overloaded_error_event_mid_stream_is_retried_then_falls_back(anthropic_runtime, httpx2_mock, sleeps):
    anthropic = httpx2_mock.post(ANTHROPIC_MESSAGES).mock(
        return_value=sse_response("anthropic", "stream_error_overloaded_midstream_ASSEMBLED.sse")
    )
    openai = httpx2_mock.post(OPENAI_CHAT).mock(
        return_value=sse_response("openai", "chat_stream_text_after_tool_result.sse")
    )

    response, shown = await stream(anthropic_runtime)

    # agent.llm_retries defaults to 2: three attempts, each taken back, then the fallback answers.
    assert anthropic.call_count == 3 and len(sleeps.delays) == 2 and openai.call_count == 1
    assert shown.count("<restarted>") == 3
    assert response.provider == "openai" and response.text == "The capital of the UK is London."


@pytest.mark.parametrize(
    ("error_type", "status", "retryable"),
    [
        ("invalid_request_error", 400, False),
        ("authentication_error", 401, False),
        ("permission_error", 403, False),
        ("not_found_error", 404, False),
        ("request_too_large", 413, False),
        ("rate_limit_error", 429, True),
        ("api_error", 500, True),
        ("overloaded_error", 529, True),
        ("a_type_added_later", 500, True),
    ],
)
def test_anthropic_stream_error_events_map_like_http_errors(error_type, status, retryable):
    import anthropic
    import httpx2

    from lib.llm.anthropic_provider import map_error

    event = body("anthropic", "error_529_overloaded_error.json")
    event["error"]["type"] = error_type
    # The SDK raises an `error` event as a status error of the stream's own 200 response.
    response = httpx2.Response(200, request=httpx2.Request("POST", "https://x.test/v1/messages"))
    client = anthropic.Anthropic(api_key="k", base_url="https://x.test")

    mapped = map_error(client._make_status_error(str(event), body=event, response=response))

    assert (mapped.status, mapped.retryable) == (status, retryable)
