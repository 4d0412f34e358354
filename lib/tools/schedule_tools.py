"""The scheduling tools: `schedule`, `list_schedules` and `cancel_schedule`.

A task belongs to the person talking and writes to this chat (and its forum topic), whatever
the model's arguments say. Times without a zone are read in the person's zone (their
profile's, else config.toml's), never silently UTC, and the answer names the zone so the model
and the person see what was understood. Bad input gets a sentence the model can act on ("no
time zone called X", "that time is in the past"), never an exception.
"""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, ClassVar

import msgspec

from lib.errors import ScheduleError
from lib.schedule import describe, store
from lib.schedule.times import parse_at, parse_timing, zone
from lib.tools.base import ToolContext, ToolResult

Text = Annotated[str, msgspec.Meta(min_length=1, max_length=store.MAX_TEXT)]


def _notify(context: ToolContext) -> None:
    """A task was made or cancelled: the server's timer re-arms at once."""
    if context.signals is not None:
        context.signals.schedule_changed.emit()


class Schedule:
    """Make a reminder or a recurring task in this chat."""

    name: ClassVar[str] = "schedule"
    description: ClassVar[str] = (
        "Schedule a reminder or a recurring task in this chat. When: exactly one of `at` for one time ('in 20 "
        "minutes', 'tomorrow at 9', 'friday 18:30', or ISO 8601 such as 2026-05-01T09:00), `every` for a "
        "repeating interval ('15 minutes', '2 hours'; add `at` for the first run), or `cron` for calendar "
        "schedules ('0 8 * * *' is every day at 08:00, '0 9 * * mon-fri' weekdays at 09:00). For 'every day at "
        "8' use cron, not every: cron keeps 08:00 local time across daylight-saving changes. Times without a "
        "zone are in the user's time zone (see 'This conversation'); give `timezone` only when the user names "
        "another. What: exactly one of `message` (sent as written, for reminders) or `prompt` (run at that time "
        "as a request to you, with your tools, e.g. 'summarise the weather in Lisbon'). Optional `count` (stop "
        "after that many runs) and `until` (stop after that time). Use list_schedules to see tasks and "
        "cancel_schedule to remove one."
    )

    class Input(msgspec.Struct, forbid_unknown_fields=True):
        at: Annotated[str | None, msgspec.Meta(description="One time, or the first run of `every`.")] = None
        every: Annotated[str | None, msgspec.Meta(description="Repeat interval, e.g. '15 minutes'.")] = None
        cron: Annotated[str | None, msgspec.Meta(description="Five-field cron expression.")] = None
        timezone: Annotated[
            str | None, msgspec.Meta(description="IANA zone for the times, when not the user's own.")
        ] = None
        message: Annotated[Text | None, msgspec.Meta(description="Text to send when it runs.")] = None
        prompt: Annotated[Text | None, msgspec.Meta(description="Request to run as a turn when it runs.")] = None
        count: Annotated[int, msgspec.Meta(ge=1, description="Stop after this many runs.")] | None = None
        until: Annotated[str | None, msgspec.Meta(description="Stop after this time.")] = None

    async def execute(self, args: Schedule.Input, context: ToolContext) -> ToolResult:
        """Store the task for the person talking, in this chat; or say what is wrong."""
        if (args.message is None) == (args.prompt is None):
            return ToolResult(
                "Give exactly one of message (text to send, for a reminder) or prompt (a request to run then).",
                is_error=True,
            )
        action, text = (store.MESSAGE, args.message) if args.message is not None else (store.PROMPT, args.prompt)

        def make() -> store.Job:
            conn = context.db.conn()
            now = time.time()
            tz = zone(args.timezone) if args.timezone else store.zone_for(conn, context.settings, context.user_id)
            timing = parse_timing(at=args.at, every=args.every, cron=args.cron, tz=tz, now=now)
            draft = store.Draft(
                user_id=context.user_id,
                chat_id=store.telegram_chat(context.provider, context.chat_id, context.user_id),
                chat_type=context.chat_type,
                message_thread_id=context.message_thread_id,
                direct_messages_topic_id=context.direct_messages_topic_id,
                timing=timing,
                action=action,
                text=text,
                max_runs=args.count,
                ends_at=parse_at(args.until, tz, now) if args.until else None,
            )
            return store.create(conn, context.settings, draft, now)

        try:
            job = await asyncio.to_thread(make)
        except ScheduleError as exc:
            return ToolResult(str(exc), is_error=True)
        _notify(context)
        first = describe.moment(job.next_run_at, job.tz)
        return ToolResult(
            f"Scheduled task #{job.id}: {describe.when(job)}, {describe.what(job)}; first run {first}. "
            "Tell the user when it will run.",
            metadata={"schedule_id": job.id},
        )


class ListSchedules:
    """List this chat's active tasks."""

    name: ClassVar[str] = "list_schedules"
    description: ClassVar[str] = (
        "List the active reminders and scheduled tasks of this chat, with their ids, what they do and their next run."
    )

    class Input(msgspec.Struct, forbid_unknown_fields=True):
        pass

    async def execute(self, args: ListSchedules.Input, context: ToolContext) -> ToolResult:
        """This chat's active tasks, one a line."""
        try:
            chat_id = store.telegram_chat(context.provider, context.chat_id, context.user_id)
        except ScheduleError as exc:
            return ToolResult(str(exc), is_error=True)
        jobs = await asyncio.to_thread(lambda: store.listing(context.db.conn(), chat_id=chat_id))
        if not jobs:
            return ToolResult("There are no active scheduled tasks in this chat.")
        return ToolResult("\n".join(f"- {describe.line(job)}" for job in jobs))


class CancelSchedule:
    """Cancel one of this chat's tasks."""

    name: ClassVar[str] = "cancel_schedule"
    description: ClassVar[str] = (
        "Cancel a reminder or scheduled task of this chat by its id (from list_schedules). Only the person who "
        "made it, or the owner, may cancel it."
    )

    class Input(msgspec.Struct, forbid_unknown_fields=True):
        id: Annotated[int, msgspec.Meta(ge=1, description="The task's id, as list_schedules shows it.")]

    async def execute(self, args: CancelSchedule.Input, context: ToolContext) -> ToolResult:
        """Cancel the task when it is this chat's and the person may; else say why not."""

        def cancel() -> str | store.Job:
            conn = context.db.conn()
            chat_id = store.telegram_chat(context.provider, context.chat_id, context.user_id)
            job = store.get(conn, args.id)
            if job is None or job.chat_id != chat_id or job.status != "active":
                return f"There is no active scheduled task #{args.id} in this chat (list_schedules shows them)."
            if not store.may_cancel(context.settings, job, context.user_id):
                return f"Task #{args.id} was made by someone else: only they or the owner may cancel it."
            return store.cancel(conn, job.id, f"user:{context.user_id}", time.time()) or f"Task #{args.id} has ended."

        try:
            outcome = await asyncio.to_thread(cancel)
        except ScheduleError as exc:
            return ToolResult(str(exc), is_error=True)
        if isinstance(outcome, str):
            return ToolResult(outcome, is_error=True)
        _notify(context)
        return ToolResult(f"Cancelled task #{outcome.id} ({describe.when(outcome)}, {describe.what(outcome)}).")


TOOLS = [Schedule(), ListSchedules(), CancelSchedule()]
