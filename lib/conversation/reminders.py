"""/reminders: the chat's active reminders and scheduled tasks, each with a button to cancel it.

Every button press is checked against the stored task: it must still be active and in the chat
the press came from, and the presser must be the person who made it or the owner (in a private
chat that is the person themselves; in a group, anyone may see the list, but only the maker or
the owner cancels). In `ash chat`, the list is the person's private Telegram chat's, where the
tasks they schedule there are delivered.

lib.schedule loads on first use: this module is imported with the command registry at start-up.
"""

from __future__ import annotations

import time

import apsw

from lib.config import Settings
from lib.errors import ScheduleError
from lib.memory.scope import is_group
from lib.telegram.types import InlineKeyboardButton, InlineKeyboardMarkup

CANCEL = "reminders:cancel:"
EMPTY = (
    "There are no reminders or scheduled tasks in this chat. Ask me for one, e.g. "
    "“remind me tomorrow at 9 to call Ana” or “every morning at 8, summarise the weather in Lisbon”."
)
GROUP_RULE = "Only the person who set a task, or the owner, can cancel it."
NOT_HERE = "That task is not in this chat."
ENDED = "That task has already ended or been cancelled."
NOT_YOURS = "Only the person who set this task, or the owner, can cancel it."


def _maker(conn: apsw.Connection, user_id: str) -> str:
    from lib.memory.store import get_profile

    profile = get_profile(conn, user_id)
    if profile and profile.display_name:
        return profile.display_name
    return f"@{profile.username}" if profile and profile.username else f"user {user_id}"


def reminders_reply(
    conn: apsw.Connection, settings: Settings, *, provider: str, chat_id: str, chat_type: str, user_id: str
) -> tuple[str, InlineKeyboardMarkup | None]:
    """/reminders' Markdown answer and its cancel buttons."""
    from lib.schedule import describe, store

    try:
        chat = store.telegram_chat(provider, chat_id, user_id)
    except ScheduleError as exc:
        return str(exc), None
    jobs = store.listing(conn, chat_id=chat)
    if not jobs:
        return EMPTY, None
    group = is_group(chat_type)
    lines = [f"- {describe.line(job)}" + (f" (set by {_maker(conn, job.user_id)})" if group else "") for job in jobs]
    footer = f"Press a button to cancel one. {GROUP_RULE}" if group else "Press a button to cancel one."
    keyboard = InlineKeyboardMarkup(
        inline_keyboard=[
            [InlineKeyboardButton(text=f"Cancel #{job.id}", callback_data=f"{CANCEL}{job.id}")] for job in jobs
        ]
    )
    return "\n".join(["Scheduled in this chat:", *lines, "", footer]), keyboard


def reminders_press(
    conn: apsw.Connection, settings: Settings, *, data: str, provider: str, chat_id: str, user_id: str
) -> tuple[str, str | None]:
    """(toast, new text for the message) for a press of a cancel button."""
    from lib.schedule import describe, store

    job_id = data.removeprefix(CANCEL)
    if not job_id.isdigit():
        return "", None
    try:
        chat = store.telegram_chat(provider, chat_id, user_id)
    except ScheduleError:
        return NOT_HERE, None
    job = store.get(conn, int(job_id))
    if job is None or job.chat_id != chat:
        return NOT_HERE, None
    if job.status != "active":
        return ENDED, None
    if not store.may_cancel(settings, job, user_id):
        return NOT_YOURS, None
    cancelled = store.cancel(conn, job.id, f"{provider}:{user_id}", time.time())
    if cancelled is None:
        return ENDED, None
    return "Cancelled.", f"Cancelled #{job.id}, which {describe.what(job)}. /reminders lists the rest."
