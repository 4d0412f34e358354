"""Providers and the router below the agent: error mapping, retries, fallback, compatible servers, cost."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest

import lib.llm.router as router
from lib.agent import complete_text
from lib.agent.usage import cost_usd
from lib.config import load_settings
from lib.errors import LLMError
from lib.llm.types import Usage
from tests.support.agent import (
    ANTHROPIC_MESSAGES,
    OPENAI_CHAT,
    body,
    configured_runtime,
    make_runtime,
    raw,
    request_json,
    write_config,
)
from tests.support.paths import REPO


def _runtime(ash_home, monkeypatch, config: str = "", **keys):
    return configured_runtime(ash_home, monkeypatch, '[embeddings]\nprovider = "none"\n' + config, **keys)


async def test_complete_text_is_non_streaming_records_usage_and_honours_a_model_override(
    ash_home, monkeypatch, httpx2_mock, sleeps
):
    runtime = _runtime(ash_home, monkeypatch)
    route = httpx2_mock.post(ANTHROPIC_MESSAGES).mock(
        side_effect=[
            httpx.Response(529, content=raw("anthropic", "error_529_overloaded_error.json")),
            httpx.Response(200, json=body("anthropic", "messages_text.json")),
        ]
    )

    text = await complete_text(
        runtime, system="Extract facts.", prompt="I live in Paris.", model="claude-haiku-4-5", user_id="7"
    )

    assert text == "The capital of France is Paris."
    sent = request_json(route.calls.last)
    assert "stream" not in sent or sent["stream"] is False
    assert sent["model"] == "claude-haiku-4-5" and sent["max_tokens"] == 1024 and sent["system"] == "Extract facts."
    assert len(sleeps.delays) == 1 and 0.25 <= sleeps.delays[0] <= 0.5
    row = runtime.db.conn().execute("SELECT user_id, purpose, input_tokens, output_tokens FROM usage").fetchall()
    assert row == [("7", "extraction", 20, 10)]
    runtime.db.close()


async def test_the_sdks_do_not_retry_on_their_own(ash_home, monkeypatch, httpx2_mock, sleeps):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    write_config(ash_home, '[embeddings]\nprovider = "none"\n[agent]\nllm_retries = 0\n')
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "https://anthropic.test")
    runtime = make_runtime()  # no OpenAI key or URL: no fallback
    route = httpx2_mock.post(ANTHROPIC_MESSAGES).mock(
        return_value=httpx.Response(529, content=raw("anthropic", "error_529_overloaded_error.json"))
    )

    with pytest.raises(LLMError) as caught:
        await complete_text(runtime, system="s", prompt="p")

    # One HTTP request: our policy allowed no retry, and the SDK added none.
    assert route.call_count == 1
    assert caught.value.retryable and caught.value.status == 529
    runtime.db.close()


async def test_a_long_retry_after_switches_to_the_fallback_instead_of_waiting(
    ash_home, monkeypatch, httpx2_mock, sleeps
):
    runtime = _runtime(ash_home, monkeypatch)
    anthropic = httpx2_mock.post(ANTHROPIC_MESSAGES).mock(
        return_value=httpx.Response(
            429, content=raw("anthropic", "error_429_rate_limit_error.json"), headers={"retry-after": "600"}
        )
    )
    openai = httpx2_mock.post(OPENAI_CHAT).mock(
        return_value=httpx.Response(200, content=raw("openai", "chat_completion_tool_calls.json"))
    )

    await complete_text(runtime, system="s", prompt="p")

    assert anthropic.call_count == 1 and sleeps.delays == [] and openai.call_count == 1
    runtime.db.close()


async def test_openai_rate_limit_is_retried_after_the_advertised_delay(ash_home, monkeypatch, httpx2_mock, sleeps):
    runtime = _runtime(ash_home, monkeypatch, '[default_llm]\nprovider = "openai"\nmodel = "gpt-4o-mini"\n')
    route = httpx2_mock.post(OPENAI_CHAT).mock(
        side_effect=[
            httpx.Response(
                429, content=raw("openai", "error_429_rate_limit_exceeded.json"), headers={"retry-after-ms": "1500"}
            ),
            httpx.Response(200, content=raw("openai", "chat_completion_tool_calls.json")),
        ]
    )

    async with router.Router(runtime.settings, runtime.llm_providers) as calls:
        response = await calls.complete(system="s", messages=())

    assert route.call_count == 2 and sleeps.delays == [1.5]
    (use,) = response.tool_uses
    assert (use.id, use.name, use.input) == (
        "call_u6Dsxbebe4USkTwFRqKRsxDz",
        "get_current_weather",
        {"location": "Peak District"},
    )
    assert response.stop_reason == "tool_use" and response.usage == Usage(69, 16)
    runtime.db.close()


async def test_openai_compatible_server_needs_no_key(ash_home, monkeypatch, httpx2_mock):
    write_config(
        ash_home,
        '[embeddings]\nprovider = "none"\n[default_llm]\nprovider = "openai"\nmodel = "llama3.2"\n'
        '[fallback_llm]\nprovider = "anthropic"\n',
    )
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:11434")
    runtime = make_runtime()
    route = httpx2_mock.post("http://localhost:11434/v1/chat/completions").mock(
        return_value=httpx.Response(200, content=raw("openai", "chat_completion_tool_calls.json"))
    )

    async with router.Router(runtime.settings, runtime.llm_providers) as calls:
        await calls.complete(system="s", messages=())

    request = route.calls.last.request
    assert request_json(route.calls.last)["model"] == "llama3.2"
    assert request.headers["authorization"] == "Bearer not-needed"
    runtime.db.close()


def test_error_mapping_distinguishes_retryable_from_not():
    import anthropic
    import httpx2
    import openai

    from lib.llm import anthropic_provider, openai_provider

    def status_error(module, status: int, payload: bytes, headers=None):
        request = httpx2.Request("POST", "https://x.test/v1")
        response = httpx2.Response(status, content=payload, headers=headers or {}, request=request)
        client = (
            module.Anthropic(api_key="k", base_url="https://x.test")
            if module is anthropic
            else module.OpenAI(api_key="k", base_url="https://x.test")
        )
        return client._make_status_error_from_response(response)

    overloaded = anthropic_provider.map_error(
        status_error(anthropic, 529, raw("anthropic", "error_529_overloaded_error.json"))
    )
    assert overloaded.retryable and overloaded.status == 529
    invalid = anthropic_provider.map_error(
        status_error(anthropic, 400, raw("anthropic", "error_400_invalid_request_error.http.json"))
    )
    assert not invalid.retryable and not invalid.switch_provider
    quota = openai_provider.map_error(status_error(openai, 429, raw("openai", "error_429_insufficient_quota.json")))
    assert quota.switch_provider and not quota.retryable
    limited = openai_provider.map_error(
        status_error(openai, 429, raw("openai", "error_429_rate_limit_exceeded.json"), {"retry-after": "26"})
    )
    assert limited.retryable and limited.retry_after == 26.0 and not limited.switch_provider
    missing = openai_provider.map_error(status_error(openai, 404, b'{"error": {"code": "model_not_found"}}'))
    assert not missing.retryable and missing.status == 404


def test_cost_uses_config_prices_and_matches_dated_model_ids(ash_home):
    config = load_settings().config

    assert cost_usd(config, "claude-sonnet-4-6", Usage(1_000_000, 0)) == 3.0
    assert cost_usd(config, "gpt-4o-mini-2024-07-18", Usage(1_000_000, 1_000_000)) == pytest.approx(0.75)
    assert cost_usd(config, "some-local-model", Usage(5000, 5000)) == 0.0


def test_importing_the_app_does_not_load_the_llm_sdks():
    modules = "app, lib.agent.turn, lib.commands.cli"
    code = f"import sys, {modules}; print(sorted(m for m in ('anthropic', 'openai') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


async def test_provider_clients_are_built_once_per_process_and_closed_at_shutdown(monkeypatch, db_path):
    """A turn reuses the previous turn's client (and its connection); shutdown closes it."""
    from lib.config import load_settings
    from lib.db import Database
    from lib.llm import router
    from lib.runtime import Runtime

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    built, closed = [], []

    class Client:
        name = "anthropic"

        async def aclose(self) -> None:
            closed.append(self)

    monkeypatch.setattr(router, "build_provider", lambda settings, llm: built.append(llm) or Client())
    settings = load_settings()
    runtime = Runtime(settings=settings, db=Database(settings.database_path), http_client=None)
    async with router.Router(runtime.settings, runtime.llm_providers) as first:
        one = first._provider(0)
    async with router.Router(runtime.settings, runtime.llm_providers) as second:
        assert second._provider(0) is one
    assert len(built) == 1 and closed == []
    await runtime.close_llm_providers()
    assert closed == [one] and runtime.llm_providers == {}
