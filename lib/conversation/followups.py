"""/followups on|off: whether Ash follows up on the events a person mentions (off by default).

In a private chat the person decides for themselves. In a group, only the owner may turn
follow-ups on (every member's events would then be followed up where the group reads them);
any member may turn them off. In `ash chat` the choice is for the person's private Telegram
chat, where follow-ups are delivered. lib.schedule loads on first use.
"""

from __future__ import annotations

import time

import apsw

from lib.config import Settings
from lib.conversation.replies import Asker, Reply
from lib.errors import ScheduleError
from lib.memory.scope import is_group

ON_TEXT = (
    "Follow-ups are on. When you mention something coming up, like “interview Thursday at 10” or "
    "“dentist tomorrow 3pm”, I will ask how it went afterwards (never at night, at most {per_day} a day). "
    "/reminders lists them, with a button to dismiss one; /followups off stops them."
)
OFF_TEXT = "Follow-ups are off: I will not check in after events you mention."
STATE_TEXT = "Follow-ups are {state} in this chat. Use /followups on or /followups off."
OWNER_ONLY = "Only the owner can turn follow-ups on in a group."
USAGE = "Say /followups on or /followups off."


def followups_reply(conn: apsw.Connection, settings: Settings, asker: Asker, args: str) -> Reply:
    """/followups' answer: the state, or the change made."""
    from lib.schedule import followups, store

    try:
        chat = store.telegram_chat(asker.provider, asker.chat_id, asker.user_id)
    except ScheduleError as exc:
        return Reply(str(exc))
    word = args.strip().lower()
    if not word:
        return Reply(STATE_TEXT.format(state="on" if followups.enabled(conn, chat) else "off"))
    if word not in ("on", "off"):
        return Reply(USAGE)
    owner = settings.config.owner
    if word == "on" and is_group(asker.chat_type) and (owner is None or str(owner) != asker.user_id):
        return Reply(OWNER_ONLY)
    cancelled = followups.set_enabled(conn, chat, word == "on", asker.actor, time.time())
    if word == "on":
        return Reply(ON_TEXT.format(per_day=settings.config.followups.max_per_day))
    dropped = f" I dismissed the {cancelled} that were waiting." if cancelled else ""
    return Reply(OFF_TEXT + dropped)
