"""OpenAI Chat Completions through the official SDK; also any OpenAI-compatible server
(Ollama, llama.cpp, vLLM) reached through OPENAI_BASE_URL. The SDK is imported lazily."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import msgspec

from lib.errors import LLMError, LLMWrongAPI
from lib.llm.base import (
    FIRST_REQUEST_IMPORTS,
    import_ahead,
    map_sdk_error,
    parse_tool_input,
    rehearse,
    response_retry_after,
)
from lib.llm.openai_stream import (
    CHUNK_DECODER,
    DONE,
    Chunk,
    StreamAssembly,
    new_call_id,
    responses_event,
    sse_data,
    stop_reason,
)
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


def _stream_error(error: dict[str, Any]) -> LLMError:
    """An `error` chunk sent after the 200, mapped by its code as an HTTP error would be."""
    code = error.get("code")
    status = code if isinstance(code, int) else None
    kind = error.get("type") or code or "error"
    return LLMError(
        f"openai stream error {kind}: {error.get('message') or error}",
        provider="openai",
        status=status,
        # Without a status it is the server's failure mid-answer, like a dropped stream.
        retryable=status is None or status in RETRYABLE_STATUS or status >= 500,
    )


RESPONSES_API_FOR_PERSON = (
    "The model server at OPENAI_BASE_URL answered with OpenAI Responses API events, not Chat Completions, "
    "so I cannot read its answer; the owner needs to point OPENAI_BASE_URL at a server that speaks "
    "Chat Completions (/v1/chat/completions)."
)


def _wrong_api(base_url: str, event: str) -> LLMWrongAPI:
    """The server speaks the Responses API where Chat Completions was asked: say so, by name."""
    return LLMWrongAPI(
        f"openai: the server at {base_url} (OPENAI_BASE_URL) answered /chat/completions with Responses API "
        f"events ({event}), not Chat Completions chunks; point OPENAI_BASE_URL at a server that serves "
        "Chat Completions at /v1/chat/completions (Ash does not use the Responses API)",
        provider="openai",
        for_person=RESPONSES_API_FOR_PERSON,
    )


def _shown_url(url: Any) -> str:
    """A base URL for the log, without any user:password it may carry."""
    text = str(url).rstrip("/")
    scheme, sep, rest = text.partition("://")
    return scheme + sep + rest.rpartition("@")[2] if sep else text


def _chunk(data: str) -> Chunk:
    try:
        return CHUNK_DECODER.decode(data)
    except msgspec.DecodeError as exc:
        # A garbled stream is the server's fault; another attempt may be whole.
        raise LLMError(f"openai: unreadable stream chunk: {exc}", provider="openai", retryable=True) from exc


def _rehearsal_chunk(delta: dict, finish: str | None = None, usage: dict | None = None) -> bytes:
    choices = [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}]
    data = {"id": "chatcmpl-warm-up", "object": "chat.completion.chunk", "created": 0, "model": "warm-up"}
    return f"data: {json.dumps({**data, 'choices': choices, 'usage': usage})}\n\n".encode()


# A whole streamed answer, the shape of Chat Completions' (rehearsed by `warm`).
REHEARSAL = b"".join(
    [
        _rehearsal_chunk({"role": "assistant", "content": ""}),
        _rehearsal_chunk({"content": "ok"}),
        _rehearsal_chunk({}, finish="stop"),
        _rehearsal_chunk({}, usage={"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}),
        b"data: [DONE]\n\n",
    ]
)


class OpenAIProvider:
    """Chat Completions; with `base_url` any compatible server."""

    name = "openai"

    def __init__(
        self, api_key: str | None, base_url: str | None = None, timeout: float = 120.0, http_client: Any = None
    ):
        import openai

        if base_url and not base_url.rstrip("/").endswith("/v1"):
            # OPENAI_BASE_URL is an origin (spec); the SDK wants the /v1 prefix.
            base_url = base_url.rstrip("/") + "/v1"
        key = api_key or PLACEHOLDER_KEY
        self._client = openai.AsyncOpenAI(
            api_key=key, base_url=base_url, max_retries=0, timeout=timeout, http_client=http_client
        )

    def warm(self) -> None:
        """Load the Chat Completions resource, its stream parser and what a first request imports;
        make a first error and stream a canned answer (see base.rehearse): the SDK builds parts of
        itself at both, on the event loop otherwise."""
        import httpx2
        import openai

        _ = self._client.chat.completions
        import_ahead(("openai.lib.streaming.chat", "jiter", *FIRST_REQUEST_IMPORTS))
        request = httpx2.Request("POST", "https://api.openai.com/v1/chat/completions")
        body = {"error": {"message": "warming up", "type": "server_error", "code": None}}
        openai.APIStatusError("warming up", response=httpx2.Response(500, request=request), body=body)
        rehearse(lambda http: OpenAIProvider("warm-up", "http://warm-up.invalid", http_client=http), REHEARSAL)

    async def complete(self, request: Request) -> Response:
        """One non-streaming call."""
        try:
            completion = await self._client.chat.completions.create(**request_params(request))
        except _sdk_errors() as exc:
            raise map_error(exc) from exc
        choices = getattr(completion, "choices", None)
        if getattr(completion, "object", None) == "response" or (
            isinstance(completion, str) and "event: response." in completion
        ):
            raise _wrong_api(_shown_url(self._client.base_url), "a Responses API answer")
        if not choices:
            # A server that is not OpenAI-compatible (or streams when asked not to) gives the SDK a
            # string or an empty body: say so rather than fail on the missing field.
            raise LLMError(
                f"openai: the server did not answer with a chat completion ({type(completion).__name__})",
                provider="openai",
            )
        choice = choices[0]
        message = choice.message
        text = (message.content or "") + (message.refusal or "")
        content: list = [TextBlock(text)] if text else []
        for call in message.tool_calls or []:
            arguments = parse_tool_input(call.function.arguments or "")
            content.append(ToolUseBlock(call.id or new_call_id(), call.function.name, arguments))
        has_tools = any(isinstance(b, ToolUseBlock) for b in content)
        stop = stop_reason(choice.finish_reason, has_tools=has_tools, refused=bool(message.refusal))
        return Response(content, stop, _usage(completion.usage), completion.model, "openai")

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        """Stream text deltas; tool calls arrive in pieces and are assembled (lib/llm/openai_stream.py).

        The SSE is read here rather than by the SDK, which hides whether `data: [DONE]` came."""
        assembly = StreamAssembly(request.model)
        ended_with_done = False
        try:
            async with self._client.chat.completions.with_streaming_response.create(
                **request_params(request), stream=True, stream_options={"include_usage": True}
            ) as raw:
                async for data in sse_data(raw.iter_lines()):
                    if data == DONE:
                        ended_with_done = True
                        break
                    chunk = _chunk(data)
                    event = responses_event(chunk)
                    if event is not None:
                        raise _wrong_api(_shown_url(self._client.base_url), event)
                    if chunk.error is not None:
                        raise _stream_error(chunk.error)
                    for text in assembly.add(chunk):
                        yield TextDelta(text)
        except _sdk_errors() as exc:
            raise map_error(exc) from exc
        response = assembly.response(ended_with_done=ended_with_done)
        if response is None:
            raise LLMError("openai: the stream ended without a finish_reason", provider="openai", retryable=True)
        yield Completed(response)

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
