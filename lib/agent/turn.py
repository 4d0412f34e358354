"""One turn of the assistant: context in, model and tools in a loop, the answer streamed out.

budget check -> session and profile -> system prompt and history within the budget -> model
call with tool definitions (streamed into the sink) -> tool runs fed back as data -> repeat
until the model stops or agent.max_steps -> persist the exchange -> compact old history.
Telegram's processor and `ash chat` both call `run_turn`.
"""

from __future__ import annotations

import asyncio
import html
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass

import msgspec

from lib.agent.contract import OutputSink, ToolWatcher, TurnInput, TurnResult
from lib.agent.presets import chat_preset
from lib.agent.prompt import build_system_prompt, is_owner, speaker_name
from lib.agent.usage import over_budget
from lib.db import monotonic_ms
from lib.errors import LLMError, user_message
from lib.llm.types import ImageBlock, Message, TextBlock, ToolResultBlock, ToolUseBlock
from lib.memory import api as memory_api
from lib.memory import store
from lib.memory.scope import is_group, memory_owner
from lib.memory.service import MemoryService
from lib.memory.store import Session, StoredMessage
from lib.runtime import Runtime
from lib.tools.base import Tool, ToolContext, ToolResult

log = logging.getLogger("ash.agent")

BUDGET_SPENT = (
    "You have used today's token budget, so I have to pause until tomorrow (UTC). "
    "The owner can raise agent.daily_token_budget."
)
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


@dataclass
class _Prepared:
    session: Session
    system: str
    history: list[StoredMessage]
    # The chat's /model pick; None: [default_llm].
    preset: str | None


def _prepare(runtime: Runtime, turn: TurnInput) -> _Prepared | None:
    """Everything before the model call (runs in a thread: apsw and embeddings block)."""
    from lib.agent.history import history_budget, load_history, select_history

    settings = runtime.settings
    memory = settings.config.memory
    conn = runtime.db.conn()
    if over_budget(conn, settings, turn.user_id):
        return None
    session = store.open_session(conn, turn.provider, turn.chat_id, turn.user_id, turn.chat_type)
    store.touch_profile(conn, turn.user_id, turn.username, turn.display_name)
    profile = store.get_profile(conn, turn.user_id)
    loaded = load_history(conn, memory, session.id, session.summary_through)
    try:
        retrieved = memory_api.retrieve_context(
            conn,
            settings,
            # This chat's memory only: in a group, the group's (lib/memory/scope.py).
            user_id=_owner(turn),
            query=turn.text,
            session_id=session.id,
            token_budget=memory.retrieval_token_budget,
        )
    except Exception:
        # Memory is a help, not a precondition: answer without it (spec: degrade, log).
        log.warning("retrieval failed; answering without retrieved context", exc_info=True)
        retrieved = []
    in_window = {m.id for m in loaded}
    retrieved = [r for r in retrieved if not (r.source_type == "message" and r.id in in_window)]
    system = build_system_prompt(settings, turn, profile=profile, retrieved=retrieved, summary=session.summary)
    budget = history_budget(memory, system, turn.text)
    history = select_history(loaded, budget=budget, recency_window=memory.recency_window)
    preset = chat_preset(conn, settings, turn.provider, turn.chat_id)
    return _Prepared(session, system, history, preset)


def _owner(turn: TurnInput) -> str:
    """Whose memory this turn reads and writes: the person's, or in a group the group's."""
    return memory_owner(turn.chat_type, turn.chat_id, turn.user_id)


def _attributed(text: str, speaker: str | None, speaker_id: str | None) -> str:
    """A group member's words, marked with who wrote them (several people share one chat)."""
    if not speaker:
        return text
    return f"[{speaker}, user {speaker_id}] {text}" if speaker_id else f"[{speaker}] {text}"


def _history_messages(history: list[StoredMessage]) -> list[Message]:
    messages = [
        Message(
            m.role,
            (TextBlock(_attributed(m.content, m.metadata.get("speaker"), m.speaker_user_id)),),
        )
        for m in history
        if m.role in ("user", "assistant") and m.content
    ]
    # A conversation sent to the model starts with the user.
    while messages and messages[0].role != "user":
        messages.pop(0)
    return messages


def _user_message(turn: TurnInput) -> Message:
    blocks: list = [ImageBlock(image.data, image.media_type) for image in turn.images]
    text = turn.text or ("(an image)" if turn.images else "")
    if is_group(turn.chat_type):
        text = _attributed(text, speaker_name(turn), turn.user_id)
    blocks.append(TextBlock(text))
    return Message("user", tuple(blocks))


def _stored_user_text(turn: TurnInput) -> str:
    text = turn.text if turn.stored_text is None else turn.stored_text
    if not turn.images:
        return text
    note = f"[{len(turn.images)} image{'s' if len(turn.images) > 1 else ''} attached]"
    return f"{text}\n{note}".strip()


# Any opening or closing tool_output tag however it is spelled: any case, spaces or a newline
# inside, attributes. Tool output is untrusted (a web page, a file, another program's words).
_FRAME_TAG = re.compile(r"<\s*/?\s*tool_output\b[^>]*>", re.IGNORECASE)


def _as_data(name: str, output: str) -> str:
    """Tool output wrapped as data (see prompt.DATA_RULE): no tag inside it can end the frame early
    or open a new one, so nothing it says can pose as Ash's own words."""
    safe = _FRAME_TAG.sub(lambda tag: "&lt;" + tag.group(0)[1:], output)
    return f'<tool_output tool="{html.escape(name)}">\n{safe}\n</tool_output>'


async def _run_tool(runtime: Runtime, tools: dict[str, Tool], use: ToolUseBlock, context: ToolContext):
    """Run one tool call, record it, and return its tool_result block."""
    from lib.tools.record import record_tool_run

    started = monotonic_ms()
    tool = tools.get(use.name)
    if tool is None:
        result = ToolResult(f"There is no tool named {use.name!r}.", is_error=True)
    else:
        try:
            args = msgspec.convert(use.input, tool.Input, strict=False)
        except msgspec.ValidationError as exc:
            result = ToolResult(f"Invalid input for {use.name}: {exc}", is_error=True)
        else:
            try:
                result = await tool.execute(args, context)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.exception("tool %s failed", use.name)
                result = ToolResult(f"The tool failed: {type(exc).__name__}: {exc}", is_error=True)
    duration = monotonic_ms() - started
    await asyncio.to_thread(
        lambda: record_tool_run(
            runtime.db.conn(), context, tool_name=use.name, tool_input=use.input, result=result, duration_ms=duration
        )
    )
    return ToolResultBlock(use.id, _as_data(use.name, result.output), is_error=result.is_error)


def _notice(stop_reason: str, explanation: str) -> str:
    """What the person is told about an answer that was cut or refused."""
    if stop_reason == "refusal":
        return REFUSED.format(because=f": {explanation.rstrip('.')}" if explanation else "")
    return CUT_NOTICES[stop_reason]


def _final_answer(steps_text: list[str], notices: list[str]) -> str:
    """The answer as shown and stored: every step's text, then any notice about how it ended."""
    return "\n\n".join([*steps_text, *notices]) if steps_text or notices else EMPTY_ANSWER


async def run_turn(
    runtime: Runtime,
    turn: TurnInput,
    sink: OutputSink,
    *,
    housekeeper: MemoryService | None = None,
    tool_watcher: ToolWatcher | None = None,
    on_schedule_change: Callable[[], None] | None = None,
) -> TurnResult:
    """Answer one user message, streaming into `sink` (and each tool run into `tool_watcher`, when
    given); persists the exchange. `on_schedule_change` is told when a tool made or cancelled a
    scheduled task (the server's scheduler re-arms its timer).

    With a `housekeeper` (the server's memory service) the new turn's vectors are computed just
    after, off the reply path; without one (`ash chat`) they are computed here. Full-text search
    finds the turn at once either way."""
    from lib.agent.history import maybe_compact
    from lib.agent.models import record, router_for
    from lib.tools.registry import available_tools, tool_specs

    settings = runtime.settings
    prepared = await asyncio.to_thread(_prepare, runtime, turn)
    if prepared is None:
        await sink.finish(BUDGET_SPENT)
        return TurnResult(BUDGET_SPENT, ok=False)
    session = prepared.session
    await sink.typing()

    tools = available_tools(settings)
    by_name = {tool.name: tool for tool in tools}
    specs = tool_specs(tools)
    context = ToolContext(
        user_id=turn.user_id,
        chat_id=turn.chat_id,
        session_id=session.id,
        provider=turn.provider,
        is_owner=is_owner(settings, turn),
        memory_owner=_owner(turn),
        chat_type=turn.chat_type,
        message_thread_id=turn.message_thread_id,
        direct_messages_topic_id=turn.direct_messages_topic_id,
        settings=settings,
        db=runtime.db,
        http=runtime.http,
        on_schedule_change=on_schedule_change,
    )
    messages = [*_history_messages(prepared.history), _user_message(turn)]
    result = TurnResult(text="")
    done: list[str] = []  # text of finished steps
    current: list[str] = []  # text of the step being streamed

    def shown() -> str:
        return "\n\n".join(t for t in [*done, "".join(current)] if t)

    async def on_text(delta: str) -> None:
        current.append(delta)
        await sink.update(shown())

    async def on_restart() -> None:
        # The attempt died mid-stream: take its text back before another attempt answers.
        current.clear()
        await sink.update(shown() or "…")

    max_steps = settings.config.agent.max_steps
    notices: list[str] = []
    try:
        async with router_for(runtime, prepared.preset) as router:
            for step in range(1, max_steps + 1):
                if step > 1:
                    await sink.typing()
                response = await router.stream(
                    system=prepared.system,
                    messages=tuple(messages),
                    tools=specs,
                    on_text=on_text,
                    on_restart=on_restart,
                )
                current.clear()
                await record(runtime, response, user_id=turn.user_id, session_id=session.id, purpose="chat")
                result.steps = step
                result.input_tokens += response.usage.input_tokens
                result.output_tokens += response.usage.output_tokens
                if response.text.strip():
                    done.append(response.text.strip())
                if response.incomplete:
                    # A cut answer's tool calls may be cut too: none of them runs.
                    result.incomplete = response.stop_reason
                    notices.append(_notice(response.stop_reason, response.stop_explanation))
                    break
                uses = response.tool_uses
                if not uses:
                    break
                if step == max_steps:
                    notices.append(STEP_LIMIT.format(steps=max_steps))
                    break
                messages.append(Message("assistant", tuple(response.content)))
                results = []
                for use in uses:
                    result.tool_calls.append(use.name)
                    if tool_watcher is not None:
                        await tool_watcher.tool_started(use.name, use.input)
                    results.append(await _run_tool(runtime, by_name, use, context))
                    if tool_watcher is not None:
                        await tool_watcher.tool_finished(use.name, is_error=results[-1].is_error)
                messages.append(Message("user", tuple(results)))
    except Exception as exc:
        if isinstance(exc, LLMError):  # the provider said why; no traceback needed
            log.warning("turn for user %s failed: %s", turn.user_id, exc.message)
        else:
            log.exception("turn for user %s failed", turn.user_id)
        text = user_message(exc)
        await sink.fail(text)
        return TurnResult(text, ok=False, steps=result.steps, tool_calls=result.tool_calls)

    answer = _final_answer(done, notices)
    result.text = answer
    await sink.finish(answer)
    if result.incomplete == "refusal":
        # Anthropic: after a refusal, reset the context (docs: handle-streaming-refusals). Not
        # storing the exchange keeps it out of the next prompt's history, retrieval and facts.
        log.info("the model refused user %s's message; the exchange is not stored", turn.user_id)
        return result
    try:
        await asyncio.to_thread(
            lambda: memory_api.record_turn(
                runtime.db.conn(),
                settings,
                session_id=session.id,
                user_id=turn.user_id,
                user_text=_stored_user_text(turn),
                answer_text=answer,
                update_id=turn.update_id,
                embed=housekeeper is None,
                owner=_owner(turn),
                speaker=speaker_name(turn) if is_group(turn.chat_type) else None,
            )
        )
    except Exception:
        # The person has their answer. Raising now would retry the turn: a second model call
        # and a second answer. The exchange is missing from history instead, and the log says so.
        log.exception("turn for user %s was answered but could not be stored", turn.user_id)
        return result
    if housekeeper is not None:
        housekeeper.kick()
    try:
        await maybe_compact(runtime, session.id, turn.user_id)
    except Exception:
        # The answer is delivered and stored; compaction tries again after the next turn.
        log.warning("compaction of session %s failed", session.id, exc_info=True)
    return result
