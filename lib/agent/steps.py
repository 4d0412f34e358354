"""The model-and-tools loop of a turn, from any point: a new turn's first call, or a parked turn's
waiting tool call once the person answered (lib/agent/resume.py).

model call (streamed into the sink) -> its tool calls run in order, each output fed back as data
-> repeat until the model stops or agent.max_steps. A risky call while the context holds outside
content (lib/agent/approval.py) is asked about first: in place where the channel can wait (the
terminal), else the turn is parked (lib/agent/pending.py) and ends with Run / Deny buttons.
"""

from __future__ import annotations

import asyncio
import dataclasses
import html
import json
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import msgspec

from lib.agent.approval import MCP_SEPARATOR, approval_reason, output_is_outside
from lib.agent.contract import ApprovalRequest, Approvals, OutputSink, ToolWatcher, TurnResult
from lib.agent.pending import TurnState
from lib.agent.recalled import after_recall
from lib.db import monotonic_ms
from lib.errors import ChannelError, LLMError, user_message
from lib.llm.types import Message, Response, ToolResultBlock, ToolUseBlock
from lib.runtime import Runtime
from lib.tools.base import Tool, ToolContext, ToolResult

log = logging.getLogger("ash.agent")

STEP_LIMIT = "(I stopped after {steps} steps, the limit set by agent.max_steps. Ask me to continue if you need more.)"
EMPTY_ANSWER = "(The model returned an empty answer.)"
# The notice that ends an unfinished answer, by stop reason (lib/llm/types.py INCOMPLETE).
CUT_NOTICES = {
    "max_tokens": (
        "(The answer was cut off here: it reached the length limit for one answer, max_tokens in "
        "the model's config. Ask me to continue.)"
    ),
    "context_window": (
        "(The answer was cut off here: the conversation filled the model's context window. "
        "/new starts a fresh conversation.)"
    ),
    "content_filter": "(The answer was cut off here by the provider's content filter.)",
}
REFUSED = (
    "(The model declined to answer this{because}. This exchange is left out of the conversation, "
    "so you can rephrase and ask again.)"
)
ASKING = "I'd like to run this, and it needs your OK first ({reason}):\n\n{call}\n\n{how}"
HOW_TO_ANSWER = "Press Run or Deny. No answer within {minutes} means Deny."
NOT_ASKED = "(Not run: {tool} needs your OK ({reason}), and there is no way to ask you here.)"
DENIED_RESULT = "Not run: the person pressed Deny. Do not try this again unless they ask."
# What outside content a tool's output counts as (lib/agent/approval.py), by tool.
OUTPUT_KINDS = {"web_fetch": "a web page", "web_search": "web search results", "bash": "command output"}

# Any opening or closing tool_output tag however it is spelled: any case, spaces or a newline
# inside, attributes. Tool output is untrusted (a web page, a file, another program's words).
_FRAME_TAG = re.compile(r"<\s*/?\s*tool_output\b[^>]*>", re.IGNORECASE)


def as_data(name: str, output: str) -> str:
    """Tool output wrapped as data (see prompt.DATA_RULE): no tag inside it can end the frame early
    or open a new one, so nothing it says can pose as Ash's own words."""
    safe = _FRAME_TAG.sub(lambda tag: "&lt;" + tag.group(0)[1:], output)
    return f'<tool_output tool="{html.escape(name)}">\n{safe}\n</tool_output>'


def output_kind(name: str) -> str:
    if MCP_SEPARATOR in name:
        return f"output of the MCP tool {name}"
    return OUTPUT_KINDS.get(name, f"output of {name}")


def show_call(name: str, tool_input: dict) -> str:
    """The exact call, as Markdown: a lone string argument (a command, a URL) verbatim in a code
    block, anything else as JSON. The fence outgrows any run of backticks inside."""
    values = list(tool_input.values())
    body = values[0] if len(values) == 1 and isinstance(values[0], str) else json.dumps(tool_input, indent=2)
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"**{name}**\n{fence}\n{body}\n{fence}"


def _notice(stop_reason: str, explanation: str) -> str:
    """What the person is told about an answer that was cut or refused."""
    if stop_reason == "refusal":
        return REFUSED.format(because=f": {explanation.rstrip('.')}" if explanation else "")
    return CUT_NOTICES[stop_reason]


def final_answer(steps_text: list[str], notices: list[str]) -> str:
    """The answer as stored: every step's text, then any notice about how it ended; "" when the
    model said nothing (EMPTY_ANSWER is shown then, never stored as the model's words)."""
    return "\n\n".join([*steps_text, *notices])


def shown_answer(answer: str) -> str:
    """What the person reads for `answer`: itself, or a note that the model said nothing."""
    return answer or EMPTY_ANSWER


def minutes(seconds: float) -> str:
    whole = max(1, round(seconds / 60))
    return f"{whole} minute{'s' if whole != 1 else ''}"


# Stores a finished turn's exchange (the result, and the answer text as it is kept).
Keep = Callable[[TurnResult, str], Awaitable[None]]


@dataclass
class Loop:
    """One run of the loop: what it needs besides the turn's state."""

    runtime: Runtime
    sink: OutputSink
    tools: dict[str, Tool]
    specs: tuple
    context: ToolContext
    tool_watcher: ToolWatcher | None = None
    approvals: Approvals | None = None
    # A parked call's answer, when resuming: True run it, False do not.
    decided: bool | None = None


async def _run_tool(loop: Loop, use: ToolUseBlock) -> tuple[ToolResultBlock, ToolResult]:
    """Run one tool call, record it, and return its tool_result block and result."""
    started = monotonic_ms()
    tool = loop.tools.get(use.name)
    if tool is None:
        result = ToolResult(f"There is no tool named {use.name!r}.", is_error=True)
    else:
        try:
            args = msgspec.convert(use.input, tool.Input, strict=False)
        except msgspec.ValidationError as exc:
            result = ToolResult(f"Invalid input for {use.name}: {exc}", is_error=True)
        else:
            try:
                result = await tool.execute(args, loop.context)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.exception("tool %s failed", use.name)
                result = ToolResult(f"The tool failed: {type(exc).__name__}: {exc}", is_error=True)
    await record_run(loop, use, result, monotonic_ms() - started)
    return ToolResultBlock(use.id, as_data(use.name, result.output), is_error=result.is_error), result


async def record_run(loop: Loop, use: ToolUseBlock, result: ToolResult, duration_ms: int = 0) -> None:
    from lib.tools.record import record_tool_run

    await asyncio.to_thread(
        lambda: record_tool_run(
            loop.runtime.db.conn(),
            loop.context,
            tool_name=use.name,
            tool_input=use.input,
            result=result,
            duration_ms=duration_ms,
        )
    )


async def _not_run(loop: Loop, use: ToolUseBlock, why: str) -> ToolResultBlock:
    """A call that does not run still gets a result (the model APIs reject a call without one)."""
    result = ToolResult(why, is_error=True)
    await record_run(loop, use, result)
    return ToolResultBlock(use.id, as_data(use.name, why), is_error=True)


async def _run_calls(loop: Loop, state: TurnState, result: TurnResult) -> ApprovalRequest | None:
    """Run the step's remaining calls in order; returns the question when the turn parks."""
    from lib.agent import pending

    settings = loop.runtime.settings.config.sandbox
    while state.uses:
        use = state.uses[0]
        decided, loop.decided = loop.decided, None
        if decided is None:
            reason = approval_reason(
                settings.approval, use.name, use.input, outside=state.outside, own_words=state.own_words
            )
            if reason is not None:
                action_id = await asyncio.to_thread(
                    lambda r=reason: pending.park(
                        loop.runtime.db.conn(),
                        state,
                        reason=r,
                        timeout=settings.approval_timeout,
                        now=loop.runtime.clock(),
                    )
                )
                request = ApprovalRequest(action_id, use.name, use.input, reason, settings.approval_timeout)
                decided = await loop.approvals.ask(request) if loop.approvals is not None else False
                if decided is None:
                    return request  # parked: the press resumes it
                status = "approved" if decided else "denied"
                await asyncio.to_thread(
                    lambda s=status, a=action_id: pending.decide(loop.runtime.db.conn(), a, s, state.turn.user_id)
                )
                if loop.approvals is None:
                    state.done.append(NOT_ASKED.format(tool=use.name, reason=reason))
        state.uses.pop(0)
        result.tool_calls.append(use.name)
        state.tool_calls.append(use.name)
        if decided is False:
            state.results.append(await _not_run(loop, use, DENIED_RESULT))
            continue
        if loop.tool_watcher is not None:
            await loop.tool_watcher.tool_started(use.name, use.input)
        # What the turn holds from outside so far: a memory the call writes waits for review.
        typed = state.turn.text if state.turn.typed_text is None else state.turn.typed_text
        loop.context = dataclasses.replace(
            loop.context,
            outside=tuple(state.outside),
            own_words=typed,
            seen_messages=frozenset(state.seen_messages),
        )
        block, outcome = await _run_tool(loop, use)
        state.results.append(block)
        if use.name == "recall" and not block.is_error:
            await after_recall(loop.runtime, loop.sink, state, outcome)
        if loop.tool_watcher is not None:
            await loop.tool_watcher.tool_finished(use.name, is_error=block.is_error)
        if output_is_outside(use.name, outcome.metadata):
            state.outside.append(output_kind(use.name))
    return None


class _Stream:
    """What the person sees while the loop runs: the steps done since `shown_from` (a resumed turn
    writes a new message: only what comes now) and the text of the step being streamed."""

    def __init__(self, sink: OutputSink, state: TurnState):
        self.sink = sink
        self.state = state
        self.shown_from = len(state.done)
        self.current: list[str] = []

    def shown(self) -> str:
        return "\n\n".join(t for t in [*self.state.done[self.shown_from :], "".join(self.current)] if t)

    async def on_text(self, delta: str) -> None:
        self.current.append(delta)
        await self.sink.update(self.shown())

    async def on_restart(self) -> None:
        # The attempt died mid-stream: take its text back before another attempt answers.
        self.current.clear()
        await self.sink.update(self.shown() or "…")


async def run_steps(
    loop: Loop, state: TurnState, *, keep: Keep | None = None
) -> tuple[TurnResult, str, ApprovalRequest | None]:
    """Run the loop from `state` until the model stops, the step limit, or a parked call.

    Returns the result, the answer text to store (every step's text, with notices), and the
    question when the turn parked. The sink has been finished (or failed) either way; on a
    failure the result has ok=False. `keep(result, answer)` stores the exchange before the
    final answer is shown: shown first, a turn interrupted in between would have answered
    without leaving a trace of it, and its next run would answer again."""
    result = TurnResult(text="", steps=state.step, input_tokens=state.input_tokens, output_tokens=state.output_tokens)
    stream = _Stream(loop.sink, state)
    notices: list[str] = []
    try:
        question = await _steps(loop, state, result, stream, notices)
    except ChannelError:
        # The answer could not be delivered (blocked: 403, a flood wait of hours, the Bot API
        # down): telling the person so through the same channel cannot work either. The channel's
        # handler decides (mark the chat blocked; retry the update later).
        raise
    except Exception as exc:
        return await _failed(loop, state, result, exc), "", None
    result.input_tokens, result.output_tokens = state.input_tokens, state.output_tokens
    return await _finish(loop, state, result, stream.shown_from, notices, question, keep)


async def _steps(
    loop: Loop, state: TurnState, result: TurnResult, stream: _Stream, notices: list[str]
) -> ApprovalRequest | None:
    """Model steps and tool calls until the model stops or the step limit; the question when a
    call parks the turn."""
    from lib.agent.models import ready_router

    max_steps = loop.runtime.settings.config.agent.max_steps
    async with await ready_router(loop.runtime, state.preset) as router:
        while True:
            if state.uses:
                question = await _run_calls(loop, state, result)
                if question is not None:
                    return question
                state.messages.append(Message("user", tuple(state.results)))
                state.results = []
            if state.step >= max_steps:
                return None
            state.step += 1
            if state.step > 1:
                await loop.sink.typing()
            response = await router.stream(
                system=state.system,
                messages=tuple(state.messages),
                tools=loop.specs,
                on_text=stream.on_text,
                on_restart=stream.on_restart,
            )
            stream.current.clear()
            if not await _took_step(loop, state, result, response, notices, max_steps):
                return None


async def _took_step(
    loop: Loop, state: TurnState, result: TurnResult, response: Response, notices: list[str], max_steps: int
) -> bool:
    """Count a model step's usage and text; whether its tool calls run next (the loop goes on)."""
    from lib.agent.models import record

    await record(loop.runtime, response, user_id=state.turn.user_id, session_id=state.session_id, purpose="chat")
    result.steps = state.step
    state.input_tokens += response.usage.input_tokens
    state.output_tokens += response.usage.output_tokens
    if response.text.strip():
        state.done.append(response.text.strip())
    if response.incomplete:
        # A cut answer's tool calls may be cut too: none of them runs.
        result.incomplete = response.stop_reason
        notices.append(_notice(response.stop_reason, response.stop_explanation))
        return False
    uses = response.tool_uses
    if not uses:
        return False
    if state.step == max_steps:
        notices.append(STEP_LIMIT.format(steps=max_steps))
        return False
    state.messages.append(Message("assistant", tuple(response.content)))
    state.uses, state.results = list(uses), []
    return True


async def _failed(loop: Loop, state: TurnState, result: TurnResult, exc: Exception) -> TurnResult:
    """The turn failed (the model, a bug): the person is told in a sentence, the log says why."""
    if isinstance(exc, LLMError):  # the provider said why; no traceback needed
        log.warning("turn for user %s failed: %s", state.turn.user_id, exc.message)
    else:
        log.error("turn for user %s failed", state.turn.user_id, exc_info=exc)
    text = user_message(exc)
    await loop.sink.fail(text)
    result.text, result.ok = text, False
    result.input_tokens, result.output_tokens = state.input_tokens, state.output_tokens
    return result


async def _finish(
    loop: Loop,
    state: TurnState,
    result: TurnResult,
    shown_from: int,
    notices: list[str],
    question: ApprovalRequest | None,
    keep: Keep | None,
) -> tuple[TurnResult, str, ApprovalRequest | None]:
    """The answer shown (with the question under it, when the turn parked) and the text stored
    (by `keep`, before it is shown)."""
    stored = final_answer(state.done, notices)
    if question is not None:
        result.waiting_for = question.id
        ask = ASKING.format(
            reason=question.reason,
            call=show_call(question.tool_name, question.tool_input),
            how=HOW_TO_ANSWER.format(minutes=minutes(question.timeout)),
        )
        shown_now = "\n\n".join(t for t in [*state.done[shown_from:], ask] if t)
        stored = "\n\n".join([*state.done, f"(Waiting for the person's OK to run {question.tool_name}.)"])
        result.text = shown_now
        if keep is not None:
            await keep(result, stored)
        await loop.sink.finish(shown_now)
        return result, stored, question
    shown_now = shown_answer(final_answer(state.done[shown_from:], notices) if shown_from else stored)
    result.text = shown_now
    if keep is not None:
        await keep(result, stored)
    await loop.sink.finish(shown_now)
    return result, stored, None
