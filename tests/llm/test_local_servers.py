"""An OpenAI-compatible server on this machine (Ollama's documented OPENAI_BASE_URL form, with /v1):
chat goes to /v1/chat/completions, no key is needed, gpt-4o is never asked for unless a fallback is
configured or OPENAI_API_KEY is set, and a missing model is named to the user."""

from __future__ import annotations

import httpx
import pytest

import lib.llm.router as router
from lib.config import load_settings
from lib.errors import LLMError, LLMNotConfigured, user_message
from tests.support.agent import body, make_runtime, request_json, write_config

OLLAMA = "http://127.0.0.1:11434/v1"
OLLAMA_CHAT = "http://127.0.0.1:11434/v1/chat/completions"
LOCAL_MODEL = '[embeddings]\nprovider = "none"\n[default_llm]\nprovider = "openai"\nmodel = "llama3.2"\n'


def models(settings) -> list[tuple[str, str]]:
    return [(llm.provider, llm.model) for llm in router.candidates(settings)]


def test_a_base_url_alone_brings_no_implicit_fallback(ash_home, monkeypatch):
    write_config(ash_home, LOCAL_MODEL)
    monkeypatch.setenv("OPENAI_BASE_URL", OLLAMA)
    assert models(load_settings()) == [("openai", "llama3.2")]

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # a real OpenAI key: gpt-4o may stand in
    assert models(load_settings()) == [("openai", "llama3.2"), ("openai", "gpt-4o")]


def test_a_fallback_written_in_the_file_is_used_with_the_base_url_alone(ash_home, monkeypatch):
    write_config(ash_home, LOCAL_MODEL + '[fallback_llm]\nprovider = "openai"\nmodel = "qwen2.5"\n')
    monkeypatch.setenv("OPENAI_BASE_URL", OLLAMA)
    assert models(load_settings()) == [("openai", "llama3.2"), ("openai", "qwen2.5")]


def test_only_a_base_url_with_the_anthropic_default_says_how_to_use_the_local_server(ash_home, monkeypatch):
    write_config(ash_home, '[embeddings]\nprovider = "none"\n')
    monkeypatch.setenv("OPENAI_BASE_URL", OLLAMA)
    with pytest.raises(LLMNotConfigured) as caught:
        router.candidates(load_settings())
    message = user_message(caught.value)
    assert "ANTHROPIC_API_KEY" in message and '[default_llm] provider = "openai"' in message
    assert "gpt-4o" not in message


async def test_chat_reaches_v1_once_without_a_key(ash_home, monkeypatch, httpx2_mock):
    write_config(ash_home, LOCAL_MODEL)
    monkeypatch.setenv("OPENAI_BASE_URL", OLLAMA)
    runtime = make_runtime()
    route = httpx2_mock.post(OLLAMA_CHAT).mock(
        return_value=httpx.Response(200, json=body("openai", "chat_completion_tool_calls.json"))
    )
    async with router.Router(runtime.settings, runtime.llm_providers) as calls:
        await calls.complete(system="s", messages=())
    assert str(route.calls.last.request.url) == OLLAMA_CHAT
    assert request_json(route.calls.last)["model"] == "llama3.2"
    runtime.db.close()


async def test_a_missing_model_is_named_and_no_gpt4o_is_asked_for(ash_home, monkeypatch, httpx2_mock, sleeps):
    write_config(ash_home, LOCAL_MODEL.replace("llama3.2", "llama9"))
    monkeypatch.setenv("OPENAI_BASE_URL", OLLAMA)
    runtime = make_runtime()
    route = httpx2_mock.post(OLLAMA_CHAT).mock(
        return_value=httpx.Response(404, json=body("openai", "error_404_model_not_found.http.json"))
    )
    with pytest.raises(LLMError) as caught:
        async with router.Router(runtime.settings, runtime.llm_providers) as calls:
            await calls.complete(system="s", messages=())
    assert [request_json(call)["model"] for call in route.calls] == ["llama9"]
    assert caught.value.model == "llama9"
    assert user_message(caught.value) == (
        "The configured openai model was not found (404: no model named llama9); the owner needs to check the config."
    )
    runtime.db.close()
