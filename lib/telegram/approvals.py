"""Run / Deny buttons for a risky tool call (lib/agent/approval.py), and what a press does.

The turn that asked is parked (lib/agent/pending.py): the press is an update of its own, queued
in the chat like any other, and resumes it. Only the person whose turn it was may press; the
first decision is the only one (a second press, or a press after the timeout, changes nothing).
A new message from that person first, or no answer within [sandbox] approval_timeout, means
the call is not run; the buttons are then replaced by one saying why.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from lib.agent import (
    ApprovalRequest,
    PendingAction,
    TurnInput,
    TurnResult,
    expired_actions,
    get_action,
    mark_shown,
    open_actions,
)
from lib.errors import TelegramError
from lib.memory.service import MemoryService
from lib.runtime import Runtime
from lib.telegram.client import TelegramClient
from lib.telegram.placement import Placement
from lib.telegram.sink import TelegramSink
from lib.telegram.types import CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup

log = logging.getLogger("ash.telegram")

PREFIX = "approve:"
RUN, DENY = "run", "deny"
NOT_YOURS = "Only the person who asked can answer this."
ALREADY = "Already answered."
TOO_LATE = "Too late: it was not run."
GONE = "This request no longer exists."
# What replaces the buttons once a request is settled (a button that only says so).
# A scheduled task's run that stopped at a request nobody answered (issue: reported as skipped).
TASK_SKIPPED = "Scheduled task #{id}: skipped. It wanted to run {tool}, which needs your OK, and got no answer."
SETTLED = {
    "approved": "✅ Run",
    "denied": "🚫 Denied",
    "expired": "⏱ Not run: no answer in time",
    "superseded": "↩ Not run: you wrote again",
}


def keyboard(action_id: int) -> InlineKeyboardMarkup:
    return InlineKeyboardMarkup(
        inline_keyboard=[
            [
                InlineKeyboardButton(text="Run", callback_data=f"{PREFIX}{action_id}:{RUN}"),
                InlineKeyboardButton(text="Deny", callback_data=f"{PREFIX}{action_id}:{DENY}"),
            ]
        ]
    )


def settled(action_id: int, status: str) -> InlineKeyboardMarkup:
    button = InlineKeyboardButton(text=SETTLED[status], callback_data=f"{PREFIX}{action_id}:done")
    return InlineKeyboardMarkup(inline_keyboard=[[button]])


def is_approval(data: str | None) -> bool:
    return bool(data) and data.startswith(PREFIX)


class TelegramApprovals:
    """Asks with buttons under the answer; the turn then waits, parked (never in place: the press
    is queued behind the turn that would be waiting for it)."""

    def __init__(self, sink: TelegramSink):
        self.sink = sink
        self.asked: ApprovalRequest | None = None

    async def ask(self, request: ApprovalRequest) -> bool | None:
        self.sink.reply_markup = keyboard(request.id)
        self.asked = request
        return None


Db = Callable[..., Awaitable[Any]]


async def run_agent_turn(
    runtime: Runtime,
    turn: TurnInput,
    sink: TelegramSink,
    *,
    housekeeper: MemoryService | None = None,
) -> TurnResult:
    """The agent's turn for Telegram: risky calls are asked about with buttons under the answer."""
    from lib.agent import run_turn

    return await run_turn(
        runtime,
        turn,
        sink,
        housekeeper=housekeeper,
        approvals=TelegramApprovals(sink),
    )


class ApprovalButtons:
    """Presses on Run / Deny, and requests that end unanswered."""

    def __init__(self, runtime: Runtime, client: Callable[[], TelegramClient], db: Db):
        self.runtime = runtime
        self._client = client
        self._db = db

    async def shown(self, action_id: int, sink: TelegramSink) -> None:
        """The question went out: remember which message holds its buttons."""
        if sink.message_ids:
            await self._db(mark_shown, action_id, sink.message_ids[-1])

    async def press(
        self, query: CallbackQuery, sink_for: Callable[[int, str, Placement], TelegramSink]
    ) -> tuple[str, str | None]:
        """Act on Run / Deny; `sink_for(chat_id, chat_type, placement)` gives the resumed answer's sink."""
        from lib.agent import resume_turn

        client = self._client()
        try:
            action_id, choice = (query.data or "")[len(PREFIX) :].split(":", 1)
            action = await self._db(get_action, int(action_id))
        except ValueError:
            action = None
        if action is None:
            await self._toast(client, query, GONE)
            return "done", f"approval {query.data}: unknown"
        if str(query.from_.id) != action.user_id:
            await self._toast(client, query, NOT_YOURS)
            return "done", f"approval #{action.id}: pressed by {query.from_.id}, not {action.user_id}"
        if not action.undecided or choice not in (RUN, DENY):
            await self._toast(client, query, ALREADY)
            return "done", f"approval #{action.id}: already {action.status}"
        if self.runtime.clock() >= action.expires_at:
            await self._close(action.id, "expired")
            await self._toast(client, query, TOO_LATE)
            return "done", f"approval #{action.id}: pressed too late"
        approved = choice == RUN
        turn = action.state.turn
        placement = Placement(turn.message_thread_id, turn.direct_messages_topic_id)
        sink = sink_for(int(action.chat_id), turn.chat_type, placement)
        approvals = TelegramApprovals(sink)
        resumed = await resume_turn(
            self.runtime,
            action.id,
            approved=approved,
            by=str(query.from_.id),
            sink=sink,
            approvals=approvals,
            before=lambda: self._settle(client, query, action.id, "approved" if approved else "denied"),
        )
        if resumed is None:  # decided by a press or the timeout in between
            await self._toast(client, query, ALREADY)
            return "done", f"approval #{action.id}: already decided"
        if approved:
            await self._task_run(action, "sent", f"ran {action.tool_name} after the person's OK")
        else:
            await self._task_run(action, "skipped", f"the person denied {action.tool_name}", tell=False)
        if approvals.asked is not None:
            await self.shown(approvals.asked.id, sink)
        return "done", f"approval #{action.id}: {'run' if approved else 'denied'}"

    async def _settle(self, client: TelegramClient, query: CallbackQuery, action_id: int, status: str) -> None:
        """Answer the press and replace its buttons by the outcome (before the answer streams)."""
        await self._toast(client, query, None)
        message = query.message
        if message is not None and message.date != 0:
            with contextlib.suppress(TelegramError):
                await client.edit_message_reply_markup(message.chat.id, message.message_id, settled(action_id, status))

    async def _toast(self, client: TelegramClient, query: CallbackQuery, text: str | None) -> None:
        with contextlib.suppress(TelegramError):
            await client.answer_callback_query(query.id, text)

    async def _close(self, action_id: int, status: str) -> PendingAction | None:
        """End a request nobody answered in time, or that a new message replaced."""
        from lib.agent import close_unanswered

        closed = await asyncio.to_thread(close_unanswered, self.runtime, action_id, status)
        if closed is None:
            return None
        await self._task_run(closed, "skipped", f"{closed.tool_name} needed approval and got none ({status})")
        if closed.prompt_message_id is not None:
            with contextlib.suppress(TelegramError):
                await self._client().edit_message_reply_markup(
                    int(closed.chat_id), closed.prompt_message_id, settled(action_id, status)
                )
        return closed

    async def _task_run(self, action: PendingAction, outcome: str, note: str, *, tell: bool = True) -> None:
        """A scheduled task's run (negative update id: lib/inbox/scheduler.py) waited on this
        request: record how it ended, and say so in its chat when it was skipped unanswered."""
        from lib.schedule import store as schedules

        turn = action.state.turn
        if turn.update_id is None or turn.update_id >= 0:
            return
        run = await self._db(schedules.run, -turn.update_id)
        if run is None:
            return
        await self._db(schedules.finish_run, -turn.update_id, outcome, note)
        if outcome == "skipped" and tell:
            text = TASK_SKIPPED.format(id=run["schedule_id"], tool=action.tool_name)
            placement = Placement(turn.message_thread_id, turn.direct_messages_topic_id)
            with contextlib.suppress(TelegramError):
                await self._client().send_message(int(action.chat_id), text, placement=placement)

    async def supersede(self, provider: str, chat_id: str, user_id: str) -> list[PendingAction]:
        """The person wrote again before answering: their waiting calls in this chat are not run."""
        ids = await self._db(open_actions, provider, chat_id, user_id)
        closed = [await self._close(action_id, "superseded") for action_id in ids]
        return [action for action in closed if action is not None]

    async def expire(self) -> list[PendingAction]:
        """Requests whose time ran out: not run (the inbox worker's sweep calls this)."""
        closed = [
            await self._close(action_id, "expired")
            for action_id in await self._db(expired_actions, self.runtime.clock())
        ]
        return [action for action in closed if action is not None]
