"""Slash commands and their buttons: /start, /help, /new, /stop, /memory, /timezone, /model
(model.py), /reminders (reminders.py), /followups (followups.py), /why (why.py), /forget with
its confirm buttons.

REGISTRY is the one list of them: every channel routes by it, /help lists it, and Telegram's
command menu is set from it (lib/telegram/menu.py), so a command added here shows up in all of
them. A command answers a Reply and a button press a Press (replies.py), which each channel
renders: Telegram as messages with inline keyboards, `ash chat` as text and numbered choices.
"""

from __future__ import annotations

import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import apsw

from lib.config import Settings
from lib.conversation import followups, model, reminders
from lib.conversation.replies import Asker, Button, Press, Reply
from lib.memory import store


@dataclass(frozen=True)
class Ask:
    """One command as asked: who asked where, what followed its name, and the answer it replied
    to (/why explains that one). `stop_running` stops the asker's answer being written, if any."""

    conn: apsw.Connection
    settings: Settings
    asker: Asker
    args: str = ""
    reply_to: int | None = None
    stop_running: Callable[[], bool] = field(default=lambda: False)


@dataclass(frozen=True)
class Command:
    """A slash command: its name, the line that describes it in /help and the menu, and its answer."""

    name: str
    description: str
    answer: Callable[[Ask], Reply]
    # /start is what Telegram's own Start button sends: it needs no place in the menu.
    listed: bool = True
    # About one person's own memory: asked in a group, it is answered in their private chat, so
    # the group never reads it (lib/memory/scope.py).
    private: bool = False


START = "Hello! I'm Ash, your assistant. Write to me as you would to a person.\n\nSend /help to see what I can do."
FORGET_YES = "forget:yes:"
FORGET_NO = "forget:no:"
FORGET_QUESTION = (
    "This deletes our conversations, the facts I saved about you, your profile and your scheduled tasks. "
    "It cannot be undone. Are you sure?"
)


def parse_command(text: str, bot_username: str | None) -> tuple[str, str] | None:
    """("new", "args") for "/new@ash_bot args"; None when not a command, or one for another bot."""
    if not text.startswith("/"):
        return None
    head, _, args = text[1:].partition(" ")
    name, _, target = head.partition("@")
    if target and bot_username and target.lower() != bot_username.lower():
        return None
    return name.lower(), args.strip()


def timezone_reply(conn: apsw.Connection, settings: Settings, user_id: str, zone: str) -> str:
    """Set the user's time zone to `zone`, or without one say which zone they are in now."""
    if not zone:
        profile = store.get_profile(conn, user_id)
        current = profile.timezone if profile and profile.timezone else f"{settings.config.timezone} (the default)"
        return f"Your time zone is {current}. Set it with /timezone and a zone name, e.g. /timezone Europe/Lisbon."
    try:
        store.set_timezone(conn, user_id, zone)
    except ValueError:
        return (
            f"I don't know the time zone `{zone}`. Use an IANA name: a region and a city, such as Europe/Lisbon, "
            "America/New_York or Asia/Tokyo (or UTC)."
        )
    local = datetime.now(UTC).astimezone(zoneinfo.ZoneInfo(zone))
    return f"Your time zone is now {zone}: it is {local:%H:%M} there."


def forget(conn: apsw.Connection, settings: Settings, user_id: str, actor: str) -> dict:
    """Delete what Ash knows about the user, including the raw updates they sent and the tasks
    they scheduled."""
    from lib.inbox.queue import scrub_user
    from lib.memory.forget import forget_user
    from lib.schedule.store import delete_user

    erasers = {"telegram_updates": scrub_user, "schedules": delete_user}
    return forget_user(conn, settings, user_id, actor, erasers=erasers)


def _new(ask: Ask) -> Reply:
    closed = store.close_session(ask.conn, ask.asker.provider, ask.asker.chat_id)
    if closed:
        return Reply("Started a new conversation. I still remember what I know about you.")
    return Reply("This is already a fresh conversation.")


def _memory(ask: Ask) -> Reply:
    from lib.conversation import pending
    from lib.memory.knowledge import describe_user

    if ask.args.strip().lower() == "pending":
        return pending.pending_reply(ask.conn, ask.settings, ask.asker)
    known = describe_user(ask.conn, ask.settings, ask.asker.user_id)
    return Reply(known + pending.waiting_line(ask.conn, ask.settings, ask.asker.user_id))


def _why(ask: Ask) -> Reply:
    # /why's module loads the memory-editing code: only when someone asks.
    from lib.conversation.why import why_reply

    return why_reply(ask.conn, ask.asker, ask.reply_to)


def _forget_question(ask: Ask) -> Reply:
    user_id = ask.asker.user_id
    yes, cancel = Button("Yes, forget me", f"{FORGET_YES}{user_id}"), Button("Cancel", f"{FORGET_NO}{user_id}")
    return Reply(FORGET_QUESTION, ((yes, cancel),))


REGISTRY = (
    Command("start", "greeting", lambda ask: Reply(START), listed=False),
    Command("new", "start a fresh conversation (I keep what I know about you)", _new),
    Command(
        "stop",
        "stop the answer I am writing",
        lambda ask: Reply("Stopped." if ask.stop_running() else "Nothing to stop."),
    ),
    Command("memory", "what I know about you (/memory pending: what waits for your review)", _memory, private=True),
    Command(
        "why", "what my last answer drew on (or reply /why to an answer), to forget or correct it", _why, private=True
    ),
    Command(
        "timezone",
        "show or set your time zone, e.g. /timezone Europe/Lisbon",
        lambda ask: Reply(timezone_reply(ask.conn, ask.settings, ask.asker.user_id, ask.args)),
    ),
    Command(
        "model",
        "show or switch the model that answers in this chat",
        lambda ask: model.model_reply(ask.conn, ask.settings, ask.asker, ask.args),
    ),
    Command(
        "reminders",
        "the reminders and scheduled tasks of this chat, with buttons to cancel",
        lambda ask: reminders.reminders_reply(ask.conn, ask.settings, ask.asker),
    ),
    Command(
        "followups",
        "on or off: whether I ask how things went after events you mention",
        lambda ask: followups.followups_reply(ask.conn, ask.settings, ask.asker, ask.args),
    ),
    Command("forget", "delete everything I know about you", _forget_question, private=True),
    Command("help", "what I can do", lambda ask: Reply(HELP)),
)
BY_NAME = {command.name: command for command in REGISTRY}
COMMANDS = tuple(BY_NAME)

HELP = "\n".join(
    [
        "I'm Ash, your assistant. Write to me as you would to a person; I remember what we talk about.",
        "",
        *(f"/{command.name} - {command.description}" for command in REGISTRY if command.listed),
    ]
)


def run_command(ask: Ask, name: str) -> Reply | None:
    """The answer to the command `name`; None when it is not one of Ash's (it then goes to the
    agent as text)."""
    command = BY_NAME.get(name)
    return command.answer(ask) if command is not None else None


def _forget_press(conn: apsw.Connection, settings: Settings, asker: Asker, data: str) -> Press:
    answer, _, owner = data.rpartition(":")
    if owner != asker.user_id:
        return Press("This button belongs to someone else.")
    if f"{answer}:" == FORGET_NO:
        return Press("Kept.", Reply("Okay, I forgot nothing."))
    counts = forget(conn, settings, asker.user_id, actor=asker.actor)
    total = sum(v for v in counts.values() if isinstance(v, int))
    return Press("Done.", Reply(f"Done: I forgot everything about you ({total} items deleted)."))


def _pending_press(conn: apsw.Connection, settings: Settings, asker: Asker, data: str) -> Press:
    from lib.conversation import pending

    return pending.press(conn, settings, asker, data)


def _why_press(conn: apsw.Connection, settings: Settings, asker: Asker, data: str) -> Press:
    from lib.conversation.why import press

    return press(conn, settings, asker, data)


# Which module a press belongs to, by the start of its button's data.
PRESSES: tuple[tuple[str, Callable[[apsw.Connection, Settings, Asker, str], Press]], ...] = (
    (model.MODEL_PICK, model.model_press),
    (reminders.CANCEL, reminders.reminders_press),
    (FORGET_YES, _forget_press),
    (FORGET_NO, _forget_press),
    ("why:", _why_press),
    ("mem:", _pending_press),
)


def run_press(conn: apsw.Connection, settings: Settings, asker: Asker, data: str) -> Press:
    """Act on a button pressed by `asker` in their chat, only as far as the presser may (stored
    state decides: a button is a request, never a permission)."""
    for prefix, act in PRESSES:
        if data.startswith(prefix):
            return act(conn, settings, asker, data)
    return Press()
