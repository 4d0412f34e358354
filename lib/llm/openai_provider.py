"""OpenAI Chat Completions through the official SDK; also any OpenAI-compatible server
(Ollama, llama.cpp, vLLM) reached through OPENAI_BASE_URL. The SDK is imported lazily."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from lib.errors import LLMError
from lib.llm.base import map_sdk_error, parse_tool_input, response_retry_after
from lib.llm.types import (
    Completed,
    ImageBlock,
    Message,
    Request,
    Response,
    StreamEvent,
    TextBlock,
    TextDelta,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)

log = logging.getLogger("ash.llm")

RETRYABLE_STATUS = {408, 409, 429, 500, 502, 503, 504}
# Local servers ignore the key, but the SDK refuses to start without one.
PLACEHOLDER_KEY = "not-needed"
FINISH_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "function_call": "tool_use", "length": "max_tokens"}


def _user_parts(message: Message) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A user message's content parts, and the `tool` messages its tool results become."""
    parts, tool_messages = [], []
    for block in message.content:
        match block:
            case TextBlock(text=text) if text:
                parts.append({"type": "text", "text": text})
            case ImageBlock(data=data, media_type=media_type):
                url = f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"
                parts.append({"type": "image_url", "image_url": {"url": url}})
            case ToolResultBlock(tool_use_id=tool_use_id, content=content, is_error=is_error):
                text = f"ERROR: {content}" if is_error else content
                tool_messages.append({"role": "tool", "tool_call_id": tool_use_id, "content": text})
    return parts, tool_messages


def to_messages(system: str, messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    """Our messages as Chat Completions `messages` (system first, tool results as `tool` messages)."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for message in messages:
        if message.role == "assistant":
            text = "".join(b.text for b in message.content if isinstance(b, TextBlock))
            calls = [
                {"id": b.id, "type": "function", "function": {"name": b.name, "arguments": json.dumps(b.input)}}
                for b in message.content
                if isinstance(b, ToolUseBlock)
            ]
            entry: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                entry["tool_calls"] = calls
            out.append(entry)
            continue
        parts, tool_messages = _user_parts(message)
        # Tool results must follow the assistant message that asked for them.
        out.extend(tool_messages)
        if parts:
            only_text = all(p["type"] == "text" for p in parts)
            out.append({"role": "user", "content": "\n".join(p["text"] for p in parts) if only_text else parts})
    return out


def request_params(request: Request) -> dict[str, Any]:
    """Keyword arguments for `chat.completions.create`."""
    params: dict[str, Any] = {
        "model": request.model,
        "messages": to_messages(request.system, request.messages),
        "max_tokens": request.max_tokens,
    }
    if request.temperature is not None:
        params["temperature"] = request.temperature
    if request.tools:
        params["tools"] = [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
            }
            for t in request.tools
        ]
    return params


def map_error(exc: BaseException) -> LLMError:
    """An SDK exception as an LLMError; 429 insufficient_quota switches provider at once."""
    import openai

    return map_sdk_error(exc, "openai", openai, _status_error)


def _status_error(exc) -> LLMError:
    status = exc.status_code
    code = getattr(exc, "code", None) or ""
    body = exc.body if isinstance(exc.body, dict) else {}
    detail = body.get("message") or str(exc)
    if status == 429 and (code == "insufficient_quota" or body.get("type") == "insufficient_quota"):
        # Billing, not load: waiting will not help.
        return LLMError(f"openai 429 insufficient_quota: {detail}", provider="openai", status=429, switch_provider=True)
    return LLMError(
        f"openai {status} {code}: {detail}".replace("  ", " "),
        provider="openai",
        status=status,
        retryable=status in RETRYABLE_STATUS or status >= 500,
        retry_after=response_retry_after(exc),
    )


def _sdk_errors() -> tuple[type[BaseException], ...]:
    """What a call may raise that is the provider's or the network's fault, not ours."""
    import httpx2
    import openai

    return (openai.OpenAIError, httpx2.HTTPError, asyncio.TimeoutError)


def _usage(raw) -> Usage:
    if raw is None:
        return Usage()
    return Usage(raw.prompt_tokens or 0, raw.completion_tokens or 0)


def _stop(finish_reason: str | None, has_tools: bool) -> str:
    # Some compatible servers say "stop" even when they called a tool.
    if has_tools:
        return "tool_use"
    return FINISH_REASONS.get(finish_reason or "", finish_reason or "other")


class OpenAIProvider:
    """Chat Completions; with `base_url` any compatible server."""

    name = "openai"

    def __init__(self, api_key: str | None, base_url: str | None = None, timeout: float = 120.0):
        import openai

        if base_url and not base_url.rstrip("/").endswith("/v1"):
            # OPENAI_BASE_URL is an origin (spec); the SDK wants the /v1 prefix.
            base_url = base_url.rstrip("/") + "/v1"
        self._client = openai.AsyncOpenAI(
            api_key=api_key or PLACEHOLDER_KEY, base_url=base_url, max_retries=0, timeout=timeout
        )

    async def complete(self, request: Request) -> Response:
        """One non-streaming call."""
        try:
            completion = await self._client.chat.completions.create(**request_params(request))
        except _sdk_errors() as exc:
            raise map_error(exc) from exc
        choice = completion.choices[0]
        content: list = []
        if choice.message.content:
            content.append(TextBlock(choice.message.content))
        for call in choice.message.tool_calls or []:
            content.append(ToolUseBlock(call.id, call.function.name, parse_tool_input(call.function.arguments or "")))
        has_tools = any(isinstance(b, ToolUseBlock) for b in content)
        stop = _stop(choice.finish_reason, has_tools)
        return Response(content, stop, _usage(completion.usage), completion.model, "openai")

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        """Stream text deltas; tool calls arrive as indexed argument pieces and are assembled here."""
        text: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        usage = Usage()
        model = request.model
        finish_reason = None
        try:
            stream = await self._client.chat.completions.create(
                **request_params(request), stream=True, stream_options={"include_usage": True}
            )
            async for chunk in stream:
                model = chunk.model or model
                if chunk.usage is not None:
                    usage = _usage(chunk.usage)
                for choice in chunk.choices:
                    delta = choice.delta
                    if delta is not None and delta.content:
                        text.append(delta.content)
                        yield TextDelta(delta.content)
                    for call in (delta.tool_calls if delta is not None else None) or []:
                        slot = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                        if call.id:
                            slot["id"] = call.id
                        if call.function is not None:
                            slot["name"] += call.function.name or ""
                            slot["arguments"] += call.function.arguments or ""
                    if choice.finish_reason:
                        finish_reason = choice.finish_reason
        except _sdk_errors() as exc:
            raise map_error(exc) from exc
        if finish_reason is None:
            raise LLMError("openai: the stream ended without a finish_reason", provider="openai", retryable=True)
        content: list = [TextBlock("".join(text))] if text else []
        for index in sorted(calls):
            slot = calls[index]
            content.append(ToolUseBlock(slot["id"], slot["name"], parse_tool_input(slot["arguments"])))
        yield Completed(Response(content, _stop(finish_reason, bool(calls)), usage, model, "openai"))

    async def embed(self, texts: list[str], *, model: str, dimensions: int | None = None) -> list[list[float]]:
        """One vector per text, in order."""
        params: dict[str, Any] = {"model": model, "input": texts, "encoding_format": "float"}
        if dimensions:
            params["dimensions"] = dimensions
        try:
            result = await self._client.embeddings.create(**params)
        except _sdk_errors() as exc:
            raise map_error(exc) from exc
        return [list(item.embedding) for item in sorted(result.data, key=lambda item: item.index)]

    async def aclose(self) -> None:
        """Release the client's connections."""
        await self._client.close()
