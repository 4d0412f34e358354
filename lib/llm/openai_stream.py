"""Chat Completions streams read as servers really send them, not only as OpenAI does.

OpenAI numbers every tool call (`index`), names it once and gives it an id, and ends the
stream with a `finish_reason` and then `data: [DONE]`. Compatible servers differ: Ollama sent
no `index` (ollama/ollama#7881) and later `index: 0` for every call (ollama/ollama#15457),
some repeat the function name in every chunk, some send a call's arguments before its name
(an empty name first, the real one once the arguments are out: vercel/ai#14722 and #16507,
seen from DeepSeek, Kimi and vLLM upstreams), some send no call id, and some end with `[DONE]`
but no `finish_reason`. The chunks are decoded here with msgspec, so a missing field
stays missing instead of being guessed.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import msgspec

from lib.llm.base import parse_tool_input
from lib.llm.types import Response, TextBlock, ToolUseBlock, Usage

DONE = "[DONE]"
FINISH_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "content_filter",
}
# Cut answers stay cut even when tool calls were sent: their arguments may be unfinished.
CUT_FINISH_REASONS = {"length", "content_filter"}


class FunctionDelta(msgspec.Struct):
    name: str | None = None
    arguments: str | None = None


class ToolCallDelta(msgspec.Struct):
    index: int | None = None
    id: str | None = None
    function: FunctionDelta | None = None


class Delta(msgspec.Struct):
    content: str | None = None
    refusal: str | None = None
    tool_calls: list[ToolCallDelta] | None = None


class Choice(msgspec.Struct):
    delta: Delta | None = None
    finish_reason: str | None = None


class ChunkUsage(msgspec.Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class Chunk(msgspec.Struct):
    # Only Responses API events have a `type` ("response.created", ...): see responses_event().
    type: str | None = None
    model: str | None = None
    choices: list[Choice] | None = None
    usage: ChunkUsage | None = None
    # OpenAI and vLLM report a failure after the 200 as a chunk holding only `error`.
    error: dict[str, Any] | None = None


CHUNK_DECODER = msgspec.json.Decoder(Chunk)


async def sse_data(lines: AsyncIterator[str]) -> AsyncIterator[str]:
    """The `data` of each server-sent event, in order; comments and other fields are skipped."""
    data: list[str] = []
    async for line in lines:
        if not line:
            if data:
                yield "\n".join(data)
                data = []
        elif line.startswith("data:"):
            value = line[len("data:") :]
            data.append(value[1:] if value.startswith(" ") else value)
    if data:
        yield "\n".join(data)


def responses_event(chunk: Chunk) -> str | None:
    """The event's name when `chunk` is an OpenAI Responses API event, not a Chat Completions chunk.

    A server (or a proxy in front of one) that answers `/chat/completions` with Responses API
    events sends nothing this reader can use; without this check the stream would end "without a
    finish_reason", be retried and then reported as an unreachable model."""
    if chunk.type and chunk.type.startswith("response."):
        return chunk.type
    return None


def new_call_id() -> str:
    """An id for a tool call sent without one: its result must name the call it answers."""
    return f"call_{uuid.uuid4().hex[:24]}"


def stop_reason(finish_reason: str | None, *, has_tools: bool, refused: bool) -> str:
    """A Chat Completions finish reason as our normalised stop reason."""
    if refused:
        return "refusal"
    if finish_reason in CUT_FINISH_REASONS:
        return FINISH_REASONS[finish_reason]
    # Some compatible servers say "stop" even when they called a tool.
    if has_tools:
        return "tool_use"
    return FINISH_REASONS.get(finish_reason or "", finish_reason or "other")


@dataclass
class _Call:
    id: str = ""
    name: str = ""
    arguments: str = ""


class ToolCallAssembler:
    """Tool-call deltas put together into whole calls, in the order the calls started.

    A delta belongs to the call with its `index`, else to the call with its `id`, else to the
    call being streamed. A call is put together until both its name and its arguments are known:
    a name that comes after the arguments of a call that had none names that call. A new id, or
    a different name for a call already named and with arguments, starts another call.
    """

    def __init__(self) -> None:
        self.calls: list[_Call] = []
        self._by_index: dict[int, _Call] = {}
        self._by_id: dict[str, _Call] = {}

    def add(self, delta: ToolCallDelta) -> None:
        """Fold one tool-call delta into its call."""
        function = delta.function or FunctionDelta()
        name = function.name or ""
        call = self._target(delta.index, delta.id or "", name)
        if delta.id and not call.id:
            call.id = delta.id
            self._by_id[delta.id] = call
        # A name repeated in every chunk is the same name, not more of it.
        if name and name != call.name:
            call.name += name
        call.arguments += function.arguments or ""

    def blocks(self) -> list[ToolUseBlock]:
        """The assembled calls; one sent without an id gets one."""
        return [ToolUseBlock(c.id or new_call_id(), c.name, parse_tool_input(c.arguments)) for c in self.calls]

    def _target(self, index: int | None, call_id: str, name: str) -> _Call:
        if index is not None:
            call = self._by_index.get(index)
            if call is None or _starts_another(call, call_id, name):
                call = self._by_index[index] = self._start()
            return call
        if call_id:
            return self._by_id.get(call_id) or self._start()
        current = self.calls[-1] if self.calls else None
        # Without index or id, a name after a whole call (named, with arguments) starts the next one.
        if current is None or (name and current.name and current.arguments):
            return self._start()
        return current

    def _start(self) -> _Call:
        self.calls.append(_Call())
        return self.calls[-1]


def _starts_another(call: _Call, call_id: str, name: str) -> bool:
    """True when a delta for a call already begun is a different call: another id (Ollama numbers
    every call 0), or another name once this call has both a name and arguments. A name for a
    call that has none yet is that call's name, however late it comes."""
    if call_id and call.id and call_id != call.id:
        return True
    return bool(name and call.name and call.arguments and name != call.name)


class StreamAssembly:
    """One streamed completion put together: text, refusal, tool calls, usage and finish reason."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.usage = Usage()
        self.finish_reason: str | None = None
        self._text: list[str] = []
        self._refusal: list[str] = []
        self._calls = ToolCallAssembler()

    def add(self, chunk: Chunk) -> list[str]:
        """Fold in one chunk; returns the pieces of text the user should see now."""
        self.model = chunk.model or self.model
        if chunk.usage is not None:
            self.usage = Usage(chunk.usage.prompt_tokens or 0, chunk.usage.completion_tokens or 0)
        shown: list[str] = []
        for choice in chunk.choices or []:
            delta = choice.delta or Delta()
            if delta.content:
                self._text.append(delta.content)
                shown.append(delta.content)
            if delta.refusal:
                # The refusal is the model's answer to the person (OpenAI's structured outputs).
                self._refusal.append(delta.refusal)
                shown.append(delta.refusal)
            for call in delta.tool_calls or []:
                self._calls.add(call)
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason
        return shown

    def response(self, *, ended_with_done: bool) -> Response | None:
        """The whole response, or None when the stream stopped before it said it was complete.

        `data: [DONE]` after the last chunk says so even without a finish_reason."""
        finish_reason = self.finish_reason
        if finish_reason is None:
            if not ended_with_done:
                return None
            finish_reason = "tool_calls" if self._calls.calls else "stop"
        text = "".join(self._text + self._refusal)
        content: list = [TextBlock(text)] if text else []
        calls = self._calls.blocks()
        content.extend(calls)
        stop = stop_reason(finish_reason, has_tools=bool(calls), refused=bool(self._refusal))
        return Response(content, stop, self.usage, self.model, "openai")
