"""One turn of the assistant: context in, model and tools in a loop, the answer streamed out.

budget check -> session and profile -> system prompt and history within the budget -> the
model-and-tools loop (lib/agent/steps.py) -> persist the exchange -> compact old history.
Telegram's inbox worker and `ash chat` both call `run_turn`; a turn parked on a risky call goes
on in lib/agent/resume.py.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from lib.agent.contract import Approvals, OutputSink, SourcesShown, ToolWatcher, TurnInput, TurnResult
from lib.agent.pending import TurnState
from lib.agent.presets import chat_preset
from lib.agent.prompt import build_system_prompt, is_owner, not_in_notes, not_sent_now, prompt_notes, speaker_name
from lib.agent.steps import CUT_NOTICES, REFUSED, STEP_LIMIT, Keep, Loop, run_steps
from lib.agent.usage import over_budget
from lib.llm.types import ImageBlock, Message, TextBlock
from lib.memory import api as memory_api
from lib.memory import provenance, store
from lib.memory.scope import is_group, memory_owner
from lib.memory.service import MemoryService
from lib.memory.store import HELD_OUTSIDE, ORIGIN_OUTSIDE, ORIGIN_TYPED, Session, StoredMessage
from lib.memory.types import SearchResult
from lib.runtime import Runtime
from lib.tools.base import Tool, ToolContext

# Kept importable from here, where they were first (tests, callers).
__all__ = ["BUDGET_SPENT", "CUT_NOTICES", "REFUSED", "STEP_LIMIT", "run_turn"]

log = logging.getLogger("ash.agent")

BUDGET_SPENT = (
    "You have used today's token budget, so I have to pause until tomorrow (UTC). "
    "The owner can raise agent.daily_token_budget."
)


@dataclass
class _Prepared:
    session: Session
    system: str
    history: list[StoredMessage]
    retrieved: list[SearchResult]
    # The chat's /model pick; None: [default_llm].
    preset: str | None
    tools: list[Tool]
    # What the prompt drew on, as recorded for /why (lib/memory/provenance.py), and how many items.
    sources_id: int | None = None
    source_count: int = 0


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
        retrieved, more = memory_api.retrieve_for_prompt(
            conn,
            settings,
            # This chat's memory only: in a group, the group's (lib/memory/scope.py).
            user_id=memory_owner_of(turn),
            query=turn.text,
            token_budget=memory.retrieval_token_budget,
        )
    except Exception:
        # Memory is a help, not a precondition: answer without it (spec: degrade, log).
        log.warning("retrieval failed; answering without retrieved context", exc_info=True)
        retrieved, more = [], False
    in_window = {m.id for m in loaded}
    retrieved = [r for r in retrieved if not (r.source_type == "message" and r.id in in_window)]
    retrieved = not_sent_now(retrieved, turn.untrusted)
    tools = offered_tools(runtime) if turn.tools else []
    system = build_system_prompt(
        settings,
        turn,
        profile=profile,
        retrieved=retrieved,
        summary=session.summary,
        tools=[(tool.name, tool.description) for tool in tools],
        more_in_memory=more,
    )
    budget = history_budget(memory, system, turn.text)
    history = select_history(loaded, budget=budget, recency_window=memory.recency_window)
    preset = chat_preset(conn, settings, turn.provider, turn.chat_id)
    sources_id, count = _record_sources(conn, turn, session.id, retrieved, prompt_notes(profile, turn))
    return _Prepared(session, system, history, retrieved, preset, tools, sources_id, count)


def _record_sources(
    conn, turn: TurnInput, session_id: int, retrieved: list[SearchResult], notes: str
) -> tuple[int | None, int]:
    """Record exactly what entered the prompt (the items build_system_prompt shows), for /why."""
    shown = not_in_notes(retrieved, notes)
    try:
        sources_id = provenance.record(
            conn,
            provider=turn.provider,
            chat_id=turn.chat_id,
            user_id=turn.user_id,
            memory_owner=memory_owner_of(turn),
            session_id=session_id,
            update_id=turn.update_id,
            retrieved=shown,
            notes=notes,
        )
    except Exception:
        # /why is a help: an answer without its record is better than no answer.
        log.warning("could not record what the prompt drew on", exc_info=True)
        return None, 0
    return sources_id, len(shown) + len(provenance.note_lines(notes))


def memory_owner_of(turn: TurnInput) -> str:
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


def stored_user_text(turn: TurnInput) -> str:
    """What history keeps of the person's message (a document's text is kept as knowledge)."""
    text = turn.text if turn.stored_text is None else turn.stored_text
    if not turn.images:
        return text
    note = f"[{len(turn.images)} image{'s' if len(turn.images) > 1 else ''} attached]"
    return f"{text}\n{note}".strip()


def origin_metadata(turn: TurnInput) -> dict | None:
    """How a stored message keeps the origin of its parts: the outside content in it, named, and
    what the person typed themselves. Stored with the message, so a later turn, fact extraction
    and retrieval never take a forward, a quote or a file's name for the person's own words."""
    if not turn.untrusted:
        return None
    typed = turn.typed_text if turn.typed_text is not None else ""
    return {ORIGIN_OUTSIDE: list(dict.fromkeys(turn.untrusted)), ORIGIN_TYPED: typed}


def _held(origin: dict | None, outside: list[str]) -> dict | None:
    """The message's origin plus the outside content its whole turn held (a page it fetched):
    fact extraction stores what it learns from such a turn pending review (lib/memory/review.py)."""
    if not outside:
        return origin
    return {**(origin or {}), HELD_OUTSIDE: list(dict.fromkeys(outside))}


def _outside_content(turn: TurnInput, prepared: _Prepared) -> list[str]:
    """The outside content a new turn starts with (lib/agent/approval.py): what came with the
    message, what came with earlier messages of the conversation (and its summary), other
    members' words in a group's history, documents and forwards among retrieved memories."""
    outside = list(turn.untrusted)
    for message in prepared.history:
        if message.role == "user" and message.speaker_user_id not in (None, turn.user_id):
            outside.append("messages from other members of this group")
        outside += [f"{name} earlier in this chat" for name in message.metadata.get(ORIGIN_OUTSIDE) or ()]
    if prepared.session.summary:
        outside += [f"{name} in the summary of this chat" for name in prepared.session.summary_outside]
    speaker = speaker_name(turn) if is_group(turn.chat_type) else None
    for item in prepared.retrieved:
        if item.metadata.get("untrusted"):
            outside.append(f"a document from memory ({item.metadata.get('file') or 'a file'})")
        elif item.source_type == "message" and item.metadata.get("speaker") not in (None, speaker):
            outside.append("messages from other members of this group")
        outside += [f"{name} from memory" for name in item.metadata.get(ORIGIN_OUTSIDE) or ()]
    return outside


def _seen_messages(prepared: _Prepared) -> list[int]:
    """The past messages the model reads whole from the start: the conversation window and the
    prompt's memory section (`recall` brings others). A long one the section shows as its
    matching part (lib/memory/search/excerpt.py) is not among them: `recall` shows it whole."""
    window = [m.id for m in prepared.history]
    return list(dict.fromkeys([*window, *memory_api.shown_whole(prepared.retrieved)]))


def _own_words(turn: TurnInput, prepared: _Prepared) -> str:
    """What the person wrote themselves: this message, and their earlier ones in the window
    (of a message that held outside content, only what they typed)."""
    earlier = [
        m.metadata.get(ORIGIN_TYPED, m.content) if ORIGIN_OUTSIDE in m.metadata else m.content
        for m in prepared.history
        if m.role == "user" and m.speaker_user_id in (None, turn.user_id)
    ]
    return "\n".join([*earlier, turn.text if turn.typed_text is None else turn.typed_text])


def tool_context(runtime: Runtime, turn: TurnInput, session_id: int) -> ToolContext:
    return ToolContext(
        user_id=turn.user_id,
        chat_id=turn.chat_id,
        session_id=session_id,
        provider=turn.provider,
        is_owner=is_owner(runtime.settings, turn),
        memory_owner=memory_owner_of(turn),
        chat_type=turn.chat_type,
        message_thread_id=turn.message_thread_id,
        direct_messages_topic_id=turn.direct_messages_topic_id,
        settings=runtime.settings,
        db=runtime.db,
        http=runtime.http,
        signals=runtime.signals,
        origin="schedule" if turn.scheduled else "user",
        speaker=speaker_name(turn) if is_group(turn.chat_type) else None,
    )


def offered_tools(runtime: Runtime) -> list[Tool]:
    """The tools this turn offers. Blocks (it may ask the Docker engine whether it answers):
    call it on a worker thread, never on the event loop."""
    from lib.tools.registry import available_tools

    return available_tools(runtime.settings)


def make_loop(
    runtime: Runtime,
    turn: TurnInput,
    session_id: int,
    sink: OutputSink,
    *,
    tools: list[Tool],
    tool_watcher: ToolWatcher | None,
    approvals: Approvals | None,
) -> Loop:
    from lib.tools.registry import tool_specs

    return Loop(
        runtime,
        sink,
        {tool.name: tool for tool in tools},
        tool_specs(tools),
        tool_context(runtime, turn, session_id),
        tool_watcher=tool_watcher,
        approvals=approvals,
    )


async def run_turn(
    runtime: Runtime,
    turn: TurnInput,
    sink: OutputSink,
    *,
    housekeeper: MemoryService | None = None,
    tool_watcher: ToolWatcher | None = None,
    approvals: Approvals | None = None,
) -> TurnResult:
    """Answer one user message, streaming into `sink` (and each tool run into `tool_watcher`, when
    given); persists the exchange. A tool that makes or cancels a scheduled task says so on
    `runtime.signals.schedule_changed` (the server's scheduler re-arms). `approvals` asks the
    person about risky calls (lib/agent/approval.py); without it they are not run.

    With a `housekeeper` (the server's memory service) the new turn's vectors are computed just
    after, off the reply path; without one (`ash chat`) they are computed here. Full-text search
    finds the turn at once either way."""
    prepared = await asyncio.to_thread(_prepare, runtime, turn)
    if prepared is None:
        await sink.finish(BUDGET_SPENT)
        return TurnResult(BUDGET_SPENT, ok=False)
    session = prepared.session
    if prepared.sources_id is not None and isinstance(sink, SourcesShown):
        sink.sources(prepared.sources_id, prepared.source_count)
    await sink.typing()
    state = TurnState(
        turn=turn,
        session_id=session.id,
        system=prepared.system,
        preset=prepared.preset,
        messages=[*_history_messages(prepared.history), _user_message(turn)],
        step=0,
        done=[],
        outside=_outside_content(turn, prepared),
        own_words=_own_words(turn, prepared),
        uses=[],
        results=[],
        sources_id=prepared.sources_id,
        seen_messages=_seen_messages(prepared),
    )
    loop = make_loop(
        runtime,
        turn,
        session.id,
        sink,
        tools=prepared.tools,
        tool_watcher=tool_watcher,
        approvals=approvals,
    )
    result, _, _ = await run_steps(loop, state, keep=keeper(runtime, state, housekeeper))
    if result.ok:
        await compact_after(runtime, state, result)
    return result


def keeper(runtime: Runtime, state: TurnState, housekeeper: MemoryService | None) -> Keep:
    """What stores the exchange for run_steps, before the final answer is shown."""

    async def keep(result: TurnResult, answer: str) -> None:
        await store_exchange(runtime, state, result, answer, housekeeper)

    return keep


async def store_exchange(
    runtime: Runtime, state: TurnState, result: TurnResult, answer: str, housekeeper: MemoryService | None
) -> None:
    """Keep the exchange (a parked turn's so far; stored again, replaced, when it ends)."""
    turn = state.turn
    if result.incomplete == "refusal":
        # Anthropic: after a refusal, reset the context (docs: handle-streaming-refusals). Not
        # storing the exchange keeps it out of the next prompt's history, retrieval and facts.
        log.info("the model refused user %s's message; the exchange is not stored", turn.user_id)
        return
    try:
        _, answer_id = await asyncio.to_thread(
            lambda: memory_api.record_turn(
                runtime.db.conn(),
                runtime.settings,
                session_id=state.session_id,
                user_id=turn.user_id,
                user_text=stored_user_text(turn),
                answer_text=answer,
                update_id=turn.update_id,
                embed=housekeeper is None,
                owner=memory_owner_of(turn),
                speaker=speaker_name(turn) if is_group(turn.chat_type) else None,
                origin=_held(origin_metadata(turn), state.outside),
            )
        )
    except Exception:
        # The answer is complete, and most of it already on screen. Raising now would retry the
        # turn: a second model call and a second answer. The exchange is missing from history
        # instead, and the log says so.
        log.exception("turn for user %s was answered but could not be stored", turn.user_id)
        return
    if state.sources_id is not None:
        await asyncio.to_thread(lambda: provenance.attach_answer(runtime.db.conn(), state.sources_id, answer_id))
    if housekeeper is not None:
        housekeeper.kick()


async def compact_after(runtime: Runtime, state: TurnState, result: TurnResult) -> None:
    """Once the answer is shown: compact old history (a model call, so never before it)."""
    from lib.agent.history import maybe_compact

    if result.waiting_for is not None or result.incomplete == "refusal":
        return
    try:
        await maybe_compact(runtime, state.session_id, state.turn.user_id)
    except Exception:
        # The answer is delivered and stored; compaction tries again after the next turn.
        log.warning("compaction of session %s failed", state.session_id, exc_info=True)
