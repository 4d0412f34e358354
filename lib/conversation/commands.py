"""Slash commands: /start, /help, /new, /stop, /memory, /timezone, /model (lib/telegram/model_command.py),
/reminders (lib/telegram/reminders_command.py), /forget (with its confirm button).

REGISTRY is the one list of them: the processor routes by it, /help lists it, and Telegram's
command menu is set from it (lib/telegram/menu.py), so a command added here shows up in all three,
and in `ash chat`, which answers them with these same handlers (lib/commands/chat_session.py).
"""

from __future__ import annotations

import logging
import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import apsw

from lib.config import Settings
from lib.memory import store
from lib.telegram.model_command import MODEL_PICK, model_press, model_reply
from lib.telegram.reminders_command import CANCEL as REMINDER_CANCEL
from lib.telegram.reminders_command import reminders_press, reminders_reply
from lib.telegram.types import BotCommand, InlineKeyboardButton, InlineKeyboardMarkup

log = logging.getLogger("ash.telegram")


@dataclass(frozen=True)
class Command:
    """A slash command: its name and the line that describes it in /help and the menu."""

    name: str
    description: str
    # /start is what Telegram's own Start button sends: it needs no place in the menu.
    listed: bool = True


REGISTRY = (
    Command("start", "greeting", listed=False),
    Command("new", "start a fresh conversation (I keep what I know about you)"),
    Command("stop", "stop the answer I am writing"),
    Command("memory", "what I know about you"),
    Command("why", "what my last answer drew on (or reply /why to an answer), to forget or correct it"),
    Command("timezone", "show or set your time zone, e.g. /timezone Europe/Lisbon"),
    Command("model", "show or switch the model that answers in this chat"),
    Command("reminders", "the reminders and scheduled tasks of this chat, with buttons to cancel"),
    Command("forget", "delete everything I know about you"),
    Command("help", "what I can do"),
)
COMMANDS = tuple(command.name for command in REGISTRY)

HELP = "\n".join(
    [
        "I'm Ash, your assistant. Write to me as you would to a person; I remember what we talk about.",
        "",
        *(f"/{command.name} - {command.description}" for command in REGISTRY if command.listed),
    ]
)


def menu() -> list[BotCommand]:
    """The command menu Telegram should show (setMyCommands), from REGISTRY."""
    return [BotCommand(command=c.name, description=c.description) for c in REGISTRY if c.listed]


START = "Hello! I'm Ash, your assistant. Write to me as you would to a person.\n\nSend /help to see what I can do."

FORGET_YES = "forget:yes:"
FORGET_NO = "forget:no:"


@dataclass(frozen=True)
class Reply:
    """What a command answers: Markdown text and optionally inline buttons."""

    text: str
    keyboard: InlineKeyboardMarkup | None = None


def parse_command(text: str, bot_username: str | None) -> tuple[str, str] | None:
    """("new", "args") for "/new@ash_bot args"; None when not a command, or one for another bot."""
    if not text.startswith("/"):
        return None
    head, _, args = text[1:].partition(" ")
    name, _, target = head.partition("@")
    if target and bot_username and target.lower() != bot_username.lower():
        return None
    return name.lower(), args.strip()


def _describe(conn: apsw.Connection, settings: Settings, user_id: str) -> str:
    from lib.memory.knowledge import describe_user

    return describe_user(conn, settings, user_id)


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


def run_command(
    conn: apsw.Connection,
    settings: Settings,
    *,
    name: str,
    user_id: str,
    chat_id: str,
    stop_running: Callable[[], bool],
    args: str = "",
    provider: str = "telegram",
    chat_type: str = "private",
    reply_to: int | None = None,
) -> Reply | None:
    """Answer a command (`args`: the text after its name); None when it is not one of Ash's (it then
    goes to the agent as text). `provider` names the channel of the chat /new and /model act on;
    `reply_to` is the message the command replied to (/why explains that answer)."""
    if name == "start":
        return Reply(START)
    if name == "help":
        return Reply(HELP)
    if name == "new":
        closed = store.close_session(conn, provider, chat_id)
        return Reply(
            "Started a new conversation. I still remember what I know about you."
            if closed
            else "This is already a fresh conversation."
        )
    if name == "stop":
        return Reply("Stopped." if stop_running() else "Nothing to stop.")
    if name == "memory":
        return Reply(_describe(conn, settings, user_id))
    if name == "timezone":
        return Reply(timezone_reply(conn, settings, user_id, args))
    if name == "why":
        from lib.telegram.why import why_reply

        return Reply(*why_reply(conn, provider=provider, chat_id=chat_id, user_id=user_id, reply_to=reply_to))
    if name == "model":
        return Reply(
            *model_reply(
                conn, settings, provider=provider, chat_id=chat_id, chat_type=chat_type, user_id=user_id, args=args
            )
        )
    if name == "reminders":
        return Reply(
            *reminders_reply(conn, settings, provider=provider, chat_id=chat_id, chat_type=chat_type, user_id=user_id)
        )
    if name == "forget":
        keyboard = InlineKeyboardMarkup(
            inline_keyboard=[
                [
                    InlineKeyboardButton(text="Yes, forget me", callback_data=f"{FORGET_YES}{user_id}"),
                    InlineKeyboardButton(text="Cancel", callback_data=f"{FORGET_NO}{user_id}"),
                ]
            ]
        )
        return Reply(
            "This deletes our conversations, the facts I saved about you, your profile and your scheduled tasks. "
            "It cannot be undone. "
            "Are you sure?",
            keyboard,
        )
    return None


def run_callback(
    conn: apsw.Connection,
    settings: Settings,
    *,
    data: str,
    user_id: str,
    chat_id: str | None,
    chat_type: str = "private",
    provider: str = "telegram",
) -> tuple[str, str | None]:
    """(toast, new text for the message) for a button press in `chat_id` (None: a message not in a
    chat), acting only when the presser may. `provider` names the channel in the audit log."""
    if data.startswith(MODEL_PICK) and chat_id is not None:
        return model_press(
            conn, settings, data=data, provider=provider, chat_id=chat_id, chat_type=chat_type, user_id=user_id
        )
    if data.startswith(REMINDER_CANCEL) and chat_id is not None:
        return reminders_press(conn, settings, data=data, provider=provider, chat_id=chat_id, user_id=user_id)
    for prefix in (FORGET_YES, FORGET_NO):
        if data.startswith(prefix):
            if data.removeprefix(prefix) != user_id:
                return "This button belongs to someone else.", None
            if prefix == FORGET_NO:
                return "Kept.", "Okay, I forgot nothing."
            counts = forget(conn, settings, user_id, actor=f"{provider}:{user_id}")
            total = sum(v for v in counts.values() if isinstance(v, int))
            return "Done.", f"Done: I forgot everything about you ({total} items deleted)."
    return "", None
