"""A parked turn (lib/agent/pending.py) goes on, or ends, once its risky call is decided.

Run or Deny: the call runs or gets a "not run" result, and the model carries on from there, its
answer streamed into a new message. No answer in time, or a new message from the person first:
the call is not run, and the stored exchange says so. Either way the exchange stored when the
turn parked is replaced by the whole of it (same update id, lib/memory/api.py record_turn).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from lib.agent import pending
from lib.agent.contract import Approvals, OutputSink, ToolWatcher, TurnResult
from lib.agent.pending import PendingAction
from lib.agent.steps import final_answer, minutes, run_steps
from lib.agent.turn import compact_after, keeper, make_loop, offered_tools, tool_context
from lib.memory.service import MemoryService
from lib.runtime import Runtime
from lib.tools.base import ToolResult

log = logging.getLogger("ash.agent")

RAN = "(Ran {tool} after your OK.)"
DENIED = "(Did not run {tool}: you pressed Deny.)"
EXPIRED = "(Did not run {tool}: no answer within {minutes}.)"
SUPERSEDED = "(Did not run {tool}: you sent a new message before answering.)"


async def resume_turn(
    runtime: Runtime,
    action_id: int,
    *,
    approved: bool,
    by: str,
    sink: OutputSink,
    housekeeper: MemoryService | None = None,
    tool_watcher: ToolWatcher | None = None,
    approvals: Approvals | None = None,
    before: Callable[[], Awaitable[None]] | None = None,
) -> tuple[PendingAction, TurnResult] | None:
    """Decide a parked call and go on with its turn; None when it was decided already (a second
    press, or a press racing the timeout). Whoever may press is the caller's to check. `before`
    runs once the decision is taken, before the answer streams (the channel shows the outcome)."""
    status = "approved" if approved else "denied"
    action = await asyncio.to_thread(lambda: pending.decide(runtime.db.conn(), action_id, status, by))
    if action is None:
        return None
    if before is not None:
        await before()
    state = action.state
    state.done.append((RAN if approved else DENIED).format(tool=action.tool_name))
    loop = make_loop(
        runtime,
        state.turn,
        state.session_id,
        sink,
        tools=await asyncio.to_thread(offered_tools, runtime),
        tool_watcher=tool_watcher,
        approvals=approvals,
    )
    loop.decided = approved
    await sink.typing()
    result, _, _ = await run_steps(loop, state, keep=keeper(runtime, state, housekeeper))
    if result.ok:
        await compact_after(runtime, state, result)
    return action, result


def close_unanswered(runtime: Runtime, action_id: int, status: str) -> PendingAction | None:
    """End a parked turn whose call was not answered (status "expired" or "superseded"): the
    call is recorded as not run, and the stored exchange ends with a note saying why (EXPIRED,
    SUPERSEDED). Runs in a thread; None when it was decided already."""
    from lib.memory import api as memory_api
    from lib.tools.record import record_tool_run

    conn = runtime.db.conn()
    action = pending.decide(conn, action_id, status, None)
    if action is None:
        return None
    timeout = runtime.settings.config.sandbox.approval_timeout
    note = (EXPIRED if status == "expired" else SUPERSEDED).format(tool=action.tool_name, minutes=minutes(timeout))
    state = action.state
    turn = state.turn
    context = tool_context(runtime, turn, state.session_id)
    use = state.uses[0]
    record_tool_run(
        conn, context, tool_name=use.name, tool_input=use.input, result=ToolResult(note, is_error=True), duration_ms=0
    )
    if turn.update_id is not None:
        from lib.agent.turn import memory_owner_of, origin_metadata, stored_user_text

        memory_api.record_turn(
            conn,
            runtime.settings,
            session_id=state.session_id,
            user_id=turn.user_id,
            user_text=stored_user_text(turn),
            answer_text=final_answer([*state.done, note], []),
            update_id=turn.update_id,
            owner=memory_owner_of(turn),
            origin=origin_metadata(turn),
        )
    return action
