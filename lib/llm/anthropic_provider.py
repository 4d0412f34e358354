"""Anthropic Messages API through the official SDK (imported lazily: it takes seconds to load)."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from lib.errors import LLMError
from lib.llm.base import (
    FIRST_REQUEST_IMPORTS,
    import_ahead,
    map_sdk_error,
    parse_tool_input,
    rehearse,
    response_retry_after,
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

RETRYABLE_STATUS = {408, 409, 429, 500, 502, 503, 504, 529}
# The HTTP status each error type comes with (https://docs.claude.com/en/api/errors). An `error`
# event inside a stream arrives on the 200 that started it, so its type stands for the status.
ERROR_TYPE_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
STOP_REASONS = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "context_window",
    "refusal": "refusal",
}


def _block(block) -> dict[str, Any] | None:
    match block:
        case TextBlock(text=text):
            # The API rejects empty text blocks (400 "must have non-empty content").
            return {"type": "text", "text": text} if text else None
        case ImageBlock(data=data, media_type=media_type):
            encoded = base64.b64encode(data).decode("ascii")
            return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": encoded}}
        case ToolUseBlock(id=id_, name=name, input=input_):
            return {"type": "tool_use", "id": id_, "name": name, "input": input_}
        case ToolResultBlock(tool_use_id=tool_use_id, content=content, is_error=is_error):
            return {"type": "tool_result", "tool_use_id": tool_use_id, "content": content, "is_error": is_error}
    raise TypeError(f"unknown block {block!r}")


def to_messages(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    """Our messages as Messages API `messages`."""
    out = []
    for message in messages:
        blocks = [b for b in (_block(block) for block in message.content) if b is not None]
        if blocks:
            out.append({"role": message.role, "content": blocks})
    return out


def request_params(request: Request) -> dict[str, Any]:
    """Keyword arguments for `messages.create`."""
    params: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": to_messages(request.messages),
    }
    if request.system:
        params["system"] = request.system
    # No temperature: the Messages API of SDK 2.x no longer takes one (config's value is ignored here).
    if request.tools:
        params["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in request.tools
        ]
    return params


def _stop_reason(value: str | None) -> str:
    return STOP_REASONS.get(value or "", value or "other")


def _explanation(stop_details) -> str:
    """A refusal's human-readable reason; the API may leave it null."""
    return (stop_details.explanation or "") if stop_details is not None else ""


def map_error(exc: BaseException) -> LLMError:
    """An SDK exception as an LLMError that says whether retrying can help."""
    import anthropic

    return map_sdk_error(exc, "anthropic", anthropic, _status_error)


def _status_error(exc) -> LLMError:
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error") if isinstance(body.get("error"), dict) else body
    kind = (error or {}).get("type", "")
    detail = (error or {}).get("message") or str(exc)
    status = exc.status_code
    origin = str(status)
    if status < 400:
        # A mid-stream `error` event: mapped as the HTTP error of its type would be; an unknown
        # type is the server's failure mid-answer, like a dropped stream.
        origin, status = "stream error", ERROR_TYPE_STATUS.get(kind, 500)
    return LLMError(
        f"anthropic {origin} {kind}: {detail}".strip(),
        provider="anthropic",
        status=status,
        retryable=status in RETRYABLE_STATUS or status >= 500,
        retry_after=response_retry_after(exc),
    )


def _sdk_errors() -> tuple[type[BaseException], ...]:
    """What a call may raise that is the provider's or the network's fault, not ours."""
    import anthropic
    import httpx2

    return (anthropic.AnthropicError, httpx2.HTTPError, asyncio.TimeoutError)


def _response(message) -> Response:
    content: list = []
    for block in message.content:
        if block.type == "text":
            content.append(TextBlock(block.text))
        elif block.type == "tool_use":
            content.append(ToolUseBlock(block.id, block.name, dict(block.input or {})))
    usage = Usage(message.usage.input_tokens or 0, message.usage.output_tokens or 0)
    stop = _stop_reason(message.stop_reason)
    return Response(content, stop, usage, message.model, "anthropic", _explanation(message.stop_details))


def _event(name: str, data: dict) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


# A whole streamed answer, the shape of the Messages API's (rehearsed by `warm`).
REHEARSAL = b"".join(
    [
        _event(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_warm_up",
                    "type": "message",
                    "role": "assistant",
                    "content": [],
                    "model": "warm-up",
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 1, "output_tokens": 1},
                },
            },
        ),
        _event(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        ),
        _event(
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
        ),
        _event("content_block_stop", {"type": "content_block_stop", "index": 0}),
        _event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 1},
            },
        ),
        _event("message_stop", {"type": "message_stop"}),
    ]
)


class AnthropicProvider:
    """Claude through the Messages API; `base_url` reaches a proxy or a test stub."""

    name = "anthropic"

    def __init__(self, api_key: str, base_url: str | None = None, timeout: float = 120.0, http_client: Any = None):
        import anthropic

        # Our router owns retries; the SDK's own would multiply them.
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout, http_client=http_client
        )

    def warm(self) -> None:
        """Load the Messages resource and what a first request imports (see base.FIRST_REQUEST_IMPORTS),
        make the SDK's first error and stream a canned answer (see base.rehearse). At a first error
        answer (429, 529, 500) the SDK builds the pydantic schemas of about a hundred error-detail
        models: 55 ms and more of the event loop's time otherwise (seen in the soak as /healthz
        answers over 100 ms at a server's first 529)."""
        import anthropic
        import httpx2

        _ = self._client.messages
        import_ahead(FIRST_REQUEST_IMPORTS)
        request = httpx2.Request("POST", "https://api.anthropic.com/v1/messages")
        body = {"type": "error", "error": {"type": "overloaded_error", "message": "warming up"}}
        anthropic.APIStatusError("warming up", response=httpx2.Response(529, request=request), body=body)
        rehearse(lambda http: AnthropicProvider("warm-up", "http://warm-up.invalid", http_client=http), REHEARSAL)

    async def complete(self, request: Request) -> Response:
        """One non-streaming call."""
        try:
            message = await self._client.messages.create(**request_params(request))
        except _sdk_errors() as exc:
            raise map_error(exc) from exc
        return _response(message)

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        """Stream text deltas; tool inputs arrive as input_json_delta pieces and are assembled here."""
        blocks: dict[int, dict[str, Any]] = {}
        usage = Usage()
        model = request.model
        stop_reason = None
        explanation = ""
        finished = False
        try:
            stream = await self._client.messages.create(**request_params(request), stream=True)
            async for event in stream:
                kind = event.type
                if kind == "message_start":
                    model = event.message.model or model
                    usage.input_tokens = event.message.usage.input_tokens or 0
                    usage.output_tokens = event.message.usage.output_tokens or 0
                elif kind == "content_block_start":
                    block = event.content_block
                    if block.type == "text":
                        blocks[event.index] = {"type": "text", "text": block.text or ""}
                    elif block.type == "tool_use":
                        blocks[event.index] = {"type": "tool_use", "id": block.id, "name": block.name, "json": ""}
                elif kind == "content_block_delta":
                    delta = event.delta
                    target = blocks.get(event.index)
                    if delta.type == "text_delta" and target is not None:
                        target["text"] += delta.text
                        yield TextDelta(delta.text)
                    elif delta.type == "input_json_delta" and target is not None:
                        target["json"] += delta.partial_json
                elif kind == "message_delta":
                    stop_reason = event.delta.stop_reason
                    explanation = _explanation(event.delta.stop_details)
                    if event.usage and event.usage.output_tokens is not None:
                        usage.output_tokens = event.usage.output_tokens
                elif kind == "message_stop":
                    finished = True
        except _sdk_errors() as exc:
            raise map_error(exc) from exc
        # message_delta carries the stop reason: the answer is complete even if the final
        # message_stop frame was lost with the connection.
        if not finished and stop_reason is None:
            raise LLMError("anthropic: the stream ended before message_stop", provider="anthropic", retryable=True)
        content: list = []
        for index in sorted(blocks):
            block = blocks[index]
            if block["type"] == "text":
                content.append(TextBlock(block["text"]))
            else:
                content.append(ToolUseBlock(block["id"], block["name"], parse_tool_input(block["json"])))
        yield Completed(Response(content, _stop_reason(stop_reason), usage, model, "anthropic", explanation))

    async def aclose(self) -> None:
        """Release the client's connections."""
        await self._client.close()
