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
from lib.conversation.replies import Asker, Button, Press, Reply, column
from lib.errors import ScheduleError
from lib.memory.scope import is_group

CANCEL = "reminders:cancel:"
HEAD = "Scheduled in this chat:"
EMPTY = (
    "There are no reminders or scheduled tasks in this chat. Ask me for one, e.g. "
    "“remind me tomorrow at 9 to call Ana” or “every morning at 8, summarise the weather in Lisbon”."
)
NOTHING_ELSE = "Nothing else is scheduled here."
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


def _verb(job) -> str:
    """A follow-up is dismissed; a task is cancelled (the same press does both)."""
    return "Dismiss" if job.purpose == "followup" else "Cancel"


def _listing(conn: apsw.Connection, chat: str, chat_type: str, done: str = "") -> Reply:
    """The chat's active tasks, a cancel button each, after `done` (what a press just did)."""
    from lib.schedule import describe, store

    jobs = store.listing(conn, chat_id=chat)
    if not jobs:
        return Reply(f"{done} {NOTHING_ELSE}" if done else EMPTY)
    head = f"{done}\n\nStill scheduled here:" if done else HEAD
    group = is_group(chat_type)
    lines = [f"- {describe.line(job)}" + (f" (set by {_maker(conn, job.user_id)})" if group else "") for job in jobs]
    footer = f"Press a button to cancel one. {GROUP_RULE}" if group else "Press a button to cancel one."
    buttons = column(*(Button(f"{_verb(job)} #{job.id}", f"{CANCEL}{job.id}") for job in jobs))
    return Reply("\n".join([head, *lines, "", footer]), buttons)


def reminders_reply(conn: apsw.Connection, settings: Settings, asker: Asker) -> Reply:
    """/reminders' answer and its cancel buttons."""
    from lib.schedule import store

    try:
        chat = store.telegram_chat(asker.provider, asker.chat_id, asker.user_id)
    except ScheduleError as exc:
        return Reply(str(exc))
    return _listing(conn, chat, asker.chat_type)


def reminders_press(conn: apsw.Connection, settings: Settings, asker: Asker, data: str) -> Press:
    """A press of a cancel button: the task cancelled, and the message lists the rest, each with
    its button still (cancelling one leaves the others cancellable)."""
    from lib.schedule import describe, store

    job_id = data.removeprefix(CANCEL)
    if not job_id.isdigit():
        return Press()
    try:
        chat = store.telegram_chat(asker.provider, asker.chat_id, asker.user_id)
    except ScheduleError:
        return Press(NOT_HERE)
    job = store.get(conn, int(job_id))
    if job is None or job.chat_id != chat:
        return Press(NOT_HERE)
    if job.status != "active":
        return Press(ENDED)
    if not store.may_cancel(settings, job, asker.user_id):
        return Press(NOT_YOURS)
    if store.cancel(conn, job.id, asker.actor, time.time()) is None:
        return Press(ENDED)
    if job.purpose == "followup":
        done = f'Dismissed #{job.id}: I will not ask about "{describe.preview(job.text, 40)}".'
        return Press("Dismissed.", _listing(conn, chat, asker.chat_type, done))
    return Press(
        "Cancelled.", _listing(conn, chat, asker.chat_type, f"Cancelled #{job.id}, which {describe.what(job)}.")
    )
