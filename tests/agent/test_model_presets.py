"""A chat's /model pick answers its turns: the preset's provider, model and settings reach the
network, the pick outlives the process, and a preset removed from the config falls back to
[default_llm]. The models are recorded payloads through httpx2_mock, the database a real file."""

from __future__ import annotations

import logging

import httpx
import pytest

from lib.agent import TurnInput, pick_preset, run_turn
from tests.support.agent import (
    ANTHROPIC_MESSAGES,
    OPENAI_CHAT,
    RecordingSink,
    body,
    make_runtime,
    request_json,
    set_keys,
    sse_response,
    write_config,
)

BASE = 'owner = 1001\n[embeddings]\nprovider = "none"\n'
MINI = '[models.mini]\nprovider = "openai"\nmodel = "gpt-4o-mini"\ntemperature = 0.2\nmax_tokens = 512\n'
CHAT = "42"


def turn(chat_id: str = CHAT) -> TurnInput:
    return TurnInput(provider="telegram", chat_id=chat_id, user_id="1001", text="Capital of the UK?")


@pytest.fixture
def configured(ash_home, monkeypatch, sleeps):
    write_config(ash_home, BASE + MINI)
    set_keys(monkeypatch)
    return ash_home


def pick(runtime, preset: str, chat_id: str = CHAT) -> None:
    pick_preset(runtime.db.conn(), "telegram", chat_id, preset)


async def test_a_chats_preset_answers_with_its_own_model_and_settings_and_other_chats_keep_the_default(
    configured, httpx2_mock
):
    runtime = make_runtime()
    pick(runtime, "mini")
    openai = httpx2_mock.post(OPENAI_CHAT).mock(
        return_value=sse_response("openai", "chat_stream_text_after_tool_result.sse")
    )
    anthropic = httpx2_mock.post(ANTHROPIC_MESSAGES).mock(return_value=sse_response("anthropic", "stream_text.sse"))

    picked = await run_turn(runtime, turn(), RecordingSink())
    other = await run_turn(runtime, turn("43"), RecordingSink())

    sent = request_json(openai.calls.last)
    assert openai.call_count == 1
    assert (sent["model"], sent["temperature"], sent["max_tokens"]) == ("gpt-4o-mini", 0.2, 512)
    assert picked.text == "The capital of the UK is London."
    assert anthropic.call_count == 1 and request_json(anthropic.calls.last)["model"] == "claude-sonnet-4-6"
    assert other.text == "Hello there!"
    runtime.db.close()


async def test_the_pick_survives_a_new_runtime_on_the_same_database(configured, httpx2_mock):
    first = make_runtime()
    pick(first, "mini")
    first.db.close()
    openai = httpx2_mock.post(OPENAI_CHAT).mock(
        return_value=sse_response("openai", "chat_stream_text_after_tool_result.sse")
    )

    restarted = make_runtime()
    result = await run_turn(restarted, turn(), RecordingSink())

    assert result.ok and request_json(openai.calls.last)["model"] == "gpt-4o-mini"
    restarted.db.close()


async def test_a_preset_removed_from_the_config_falls_back_to_default_llm_with_a_log_line(
    configured, monkeypatch, httpx2_mock, caplog
):
    before = make_runtime()
    pick(before, "mini")
    before.db.close()
    write_config(configured, BASE)  # the owner deleted [models.mini]
    anthropic = httpx2_mock.post(ANTHROPIC_MESSAGES).mock(return_value=sse_response("anthropic", "stream_text.sse"))

    after = make_runtime()
    with caplog.at_level(logging.WARNING, logger="ash.agent"):
        result = await run_turn(after, turn(), RecordingSink())

    assert result.ok and result.text == "Hello there!"
    assert request_json(anthropic.calls.last)["model"] == "claude-sonnet-4-6"
    assert "picked the model preset 'mini', which config.toml no longer has; [default_llm] answers" in caplog.text
    after.db.close()


async def test_when_the_preset_keeps_failing_the_configured_fallback_answers(
    ash_home, monkeypatch, httpx2_mock, sleeps
):
    write_config(
        ash_home,
        BASE
        + '[models.haiku]\nprovider = "anthropic"\nmodel = "claude-haiku-4-5"\n'
        + '[fallback_llm]\nprovider = "openai"\nmodel = "gpt-4.1-mini"\n',
    )
    set_keys(monkeypatch)
    runtime = make_runtime()
    pick(runtime, "haiku")
    overloaded = body("anthropic", "error_529_overloaded_error.http.json")
    anthropic = httpx2_mock.post(ANTHROPIC_MESSAGES).mock(return_value=httpx.Response(529, json=overloaded))
    openai = httpx2_mock.post(OPENAI_CHAT).mock(
        return_value=sse_response("openai", "chat_stream_text_after_tool_result.sse")
    )

    result = await run_turn(runtime, turn(), RecordingSink())

    # Only the preset was asked before the fallback: [default_llm] (claude-sonnet-4-6) never was.
    assert {request_json(call)["model"] for call in anthropic.calls} == {"claude-haiku-4-5"}
    assert request_json(openai.calls.last)["model"] == "gpt-4.1-mini"
    assert result.ok
    runtime.db.close()


async def test_a_preset_whose_provider_has_no_key_names_the_key_and_the_preset(ash_home, monkeypatch, httpx2_mock):
    write_config(ash_home, BASE + MINI)
    set_keys(monkeypatch, openai=False)
    monkeypatch.delenv("OPENAI_BASE_URL")
    runtime = make_runtime()
    pick(runtime, "mini")
    sink = RecordingSink()

    result = await run_turn(runtime, turn(), sink)

    assert not result.ok
    [failure] = sink.of("fail")
    assert failure.startswith("No language model is configured: set OPENAI_API_KEY (for [models.mini], openai)")
    runtime.db.close()
