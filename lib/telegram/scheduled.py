"""Running a fired scheduled task in its chat: a fixed message, or a prompt run as a turn.

The inbox worker hands the Telegram handler claims of kind "scheduled" (queued by
lib/inbox/scheduler.py); this module does what the task says, in the chat and forum topic it
was made in, through the same TelegramSink as any answer (so a run resumed after a crash edits
what it had sent instead of sending it again). A prompt is the task maker's own words, run as
a turn in their name: their daily token budget applies, and the tools' output in it is data
like in any turn. A task that was cancelled, forgotten, or whose maker lost access is skipped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from lib.agent import TurnInput, TurnResult, mark_shown
from lib.config import Settings
from lib.conversation import access
from lib.inbox import queue as inbox
from lib.inbox.scheduler import PAYLOAD_DECODER, Payload
from lib.memory import store as memory_store
from lib.schedule import describe, followups
from lib.schedule import store as schedules
from lib.telegram import chats
from lib.telegram.client import TelegramClient
from lib.telegram.placement import Placement
from lib.telegram.sink import TelegramSink

log = logging.getLogger("ash.telegram")

BELL = "⏰"
BUDGET_SPENT = (
    "I skipped your scheduled task #{id} ({what}): today's token budget is spent. It runs again at its next time."
)
GAVE_UP = "I could not run scheduled task #{id} ({tries}); it runs again at its next time, if it has one."


def _late_note(job: schedules.Job, payload: Payload) -> str:
    """Why a run comes late, for the person (and the model)."""
    due = describe.moment(payload.scheduled_for, job.tz)
    note = f"it was due {due}, while I was not running"
    if payload.missed:
        runs = "run" if payload.missed == 1 else "runs"
        note += f"; {payload.missed} earlier {runs} in that time were missed and are not repeated"
    return note


def message_text(job: schedules.Job, payload: Payload) -> str:
    """What a reminder says: its text, and why it is late when it is."""
    text = f"{BELL} {job.text}"
    if payload.late:
        text += f"\n\n_(This comes late: {_late_note(job, payload)}.)_"
    return text


def prompt_text(job: schedules.Job, payload: Payload) -> str:
    """The turn's message for a task that runs a prompt: what it is, then the maker's words."""
    due = describe.moment(payload.scheduled_for, job.tz)
    late = f"; it runs late: {_late_note(job, payload)}" if payload.late else ""
    return (
        f"[Scheduled task #{job.id}, {describe.when(job)}, set up earlier by this user; this run was due {due}{late}. "
        "Do what it asks now and answer with the result. The request:]\n" + job.text
    )


def placement_of(job: schedules.Job) -> Placement:
    """A task's messages go to the forum topic (or direct-messages topic) it was made in."""
    return Placement(job.message_thread_id, job.direct_messages_topic_id)


Db = Callable[..., Awaitable[Any]]
SinkFor = Callable[[inbox.Claim, int, str, Placement], TelegramSink]
Runner = Callable[[TurnInput, TelegramSink], Awaitable[TurnResult]]


class ScheduledRuns:
    """Runs the fired tasks the Telegram handler is given; `db` runs fn(conn, ...) in a thread,
    `sink_for` makes the answer's sink (recording sent messages under the claim)."""

    def __init__(
        self, db: Db, settings: Settings, *, sink_for: SinkFor, runner: Runner, clock: Callable[[], float] = time.time
    ):
        self._db = db
        self.settings = settings
        self._sink_for = sink_for
        self._runner = runner
        self._clock = clock

    async def job_of(self, claim: inbox.Claim) -> tuple[Payload | None, schedules.Job | None]:
        """The run a claim carries and its task (None when the task is gone)."""
        try:
            payload = PAYLOAD_DECODER.decode(claim.payload)
        except msgspec.DecodeError:
            return None, None
        return payload, await self._db(schedules.get, payload.schedule_id)

    async def run(self, claim: inbox.Claim) -> tuple[str, str | None]:
        """Do what the task says; returns the inbox status and a note."""
        payload, job = await self.job_of(claim)
        if payload is None:
            return "skipped", "a scheduled run that does not decode"
        if job is None:
            return "skipped", f"scheduled task #{payload.schedule_id} no longer exists (forgotten or removed)"
        why_not = await self._why_not(job)
        if why_not is not None:
            await self._db(schedules.finish_run, payload.run_id, "skipped", why_not)
            return "skipped", f"scheduled task #{job.id}: {why_not}"
        try:
            return await self._deliver(claim, job, payload)
        except Exception:
            # Recorded now (the inbox row keeps the error); a retry that works records "sent" over it.
            await self._db(schedules.finish_run, payload.run_id, "failed")
            raise

    async def _deliver(self, claim: inbox.Claim, job: schedules.Job, payload: Payload) -> tuple[str, str | None]:
        sink = self._sink_for(claim, int(job.chat_id), job.chat_type, placement_of(job))
        if job.purpose == schedules.FOLLOWUP:
            return await self._follow_up(claim, job, payload, sink)
        if job.action == schedules.PROMPT and await self._over_budget(job):
            await sink.finish(BUDGET_SPENT.format(id=job.id, what=describe.what(job, 40)))
            await self._db(schedules.finish_run, payload.run_id, "skipped", "daily token budget spent")
            return "skipped", f"scheduled task #{job.id}: the daily token budget is spent"
        if job.action == schedules.MESSAGE:
            await sink.finish(message_text(job, payload))
            ok = True
        else:
            result = await self._turn(claim, job, payload, sink)
            if result.waiting_for is not None:
                # A risky call waits for Run / Deny: the run is recorded when it is answered, or
                # reported skipped when it is not (lib/telegram/approvals.py).
                if sink.message_ids:
                    await self._db(mark_shown, result.waiting_for, sink.message_ids[-1])
                return "done", f"scheduled task #{job.id}: waiting for approval #{result.waiting_for}"
            ok = result.ok
        await self._db(schedules.finish_run, payload.run_id, "sent" if ok else "failed")
        return "done", f"scheduled task #{job.id}" + ("" if ok else ": the turn reported failure")

    async def _why_not(self, job: schedules.Job) -> str | None:
        """Why a task must not run now, or None."""
        if job.status == "cancelled":
            return "cancelled before it ran"
        if not job.user_id.isdigit() or not await self._db(access.is_allowed, self.settings, int(job.user_id), None):
            return "its maker may no longer talk to Ash"
        state = await self._db(chats.chat_state, job.chat_id)
        if state and state["blocked_at"]:
            return "the chat blocked the bot"
        return None

    async def _over_budget(self, job: schedules.Job) -> bool:
        from lib.agent import over_budget

        return await self._db(over_budget, self.settings, job.user_id)

    async def _follow_up(
        self, claim: inbox.Claim, job: schedules.Job, payload: Payload, sink: TelegramSink
    ) -> tuple[str, str | None]:
        """Check in after the event: one short message from a tool-less turn, unless the quiet
        hours, the day's cap, two unanswered follow-ups or the token budget say not now."""
        if claim.answer is not None:
            # Killed after the check-in was written: show that one again, no second model call.
            await sink.finish(msgspec.json.decode(claim.answer)["text"])
            await self._db(schedules.finish_run, payload.run_id, "sent")
            return "done", f"follow-up #{job.id}: shown again after an interruption"
        why_not = await self._db(followups.why_not_now, self.settings, job, self._clock())
        if why_not is None and await self._over_budget(job):
            why_not = "the daily token budget is spent"
        if why_not is not None:
            await self._db(schedules.finish_run, payload.run_id, "skipped", why_not)
            return "skipped", f"follow-up #{job.id}: {why_not}"
        text = followups.check_in_prompt(job, describe.event_when(job))
        result = await self._turn(claim, job, payload, sink, text=text, tools=False)
        await self._db(schedules.finish_run, payload.run_id, "sent" if result.ok else "failed")
        if result.ok:
            await self._db(followups.sent, job.user_id)
        return "done", f"follow-up #{job.id}" + ("" if result.ok else ": the turn reported failure")

    async def _turn(
        self,
        claim: inbox.Claim,
        job: schedules.Job,
        payload: Payload,
        sink: TelegramSink,
        *,
        text: str | None = None,
        tools: bool = True,
    ) -> TurnResult:
        profile = await self._db(memory_store.get_profile, job.user_id)
        turn = TurnInput(
            provider="telegram",
            chat_id=job.chat_id,
            user_id=job.user_id,
            text=text or prompt_text(job, payload),
            tools=tools,
            chat_type=job.chat_type,
            username=profile.username if profile else None,
            display_name=profile.display_name if profile else None,
            update_id=claim.update_id,
            message_thread_id=job.message_thread_id,
            direct_messages_topic_id=job.direct_messages_topic_id,
            scheduled=True,
        )
        await sink.typing()
        result = await self._runner(turn, sink)
        if not sink.finished:
            await sink.finish(result.text or "…")
        return result

    async def gave_up(self, claim: inbox.Claim, client: TelegramClient) -> None:
        """Every attempt failed: tell the chat once, where the task writes."""
        payload, job = await self.job_of(claim)
        if payload is None or job is None:
            return
        await self._db(schedules.finish_run, payload.run_id, "failed", f"gave up after {claim.attempts} attempt(s)")
        tries = "I tried once" if claim.attempts == 1 else f"I tried {claim.attempts} times"
        await client.send_message(int(job.chat_id), GAVE_UP.format(id=job.id, tries=tries), placement=placement_of(job))
