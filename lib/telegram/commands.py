"""Slash commands in Telegram: /start, /help, /new, /stop, /memory, /forget (with its confirm button).

REGISTRY is the one list of them: the processor routes by it, /help lists it, and Telegram's
command menu is set from it (lib/telegram/menu.py), so a command added here shows up in all three.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import apsw

from lib.config import Settings
from lib.memory import store
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


def forget(conn: apsw.Connection, settings: Settings, user_id: str, actor: str) -> dict:
    """Delete what Ash knows about the user, including the raw updates they sent."""
    from lib.inbox.queue import scrub_user
    from lib.memory.forget import forget_user

    return forget_user(conn, settings, user_id, actor, erasers={"telegram_updates": scrub_user})


def run_command(
    conn: apsw.Connection,
    settings: Settings,
    *,
    name: str,
    user_id: str,
    chat_id: str,
    stop_running: Callable[[], bool],
) -> Reply | None:
    """Answer a command; None when it is not one of Ash's (it then goes to the agent as text)."""
    if name == "start":
        return Reply(START)
    if name == "help":
        return Reply(HELP)
    if name == "new":
        closed = store.close_session(conn, "telegram", chat_id)
        return Reply(
            "Started a new conversation. I still remember what I know about you."
            if closed
            else "This is already a fresh conversation."
        )
    if name == "stop":
        return Reply("Stopped." if stop_running() else "Nothing to stop.")
    if name == "memory":
        return Reply(_describe(conn, settings, user_id))
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
            "This deletes our conversations, the facts I saved about you and your profile. It cannot be undone. "
            "Are you sure?",
            keyboard,
        )
    return None


def run_callback(conn: apsw.Connection, settings: Settings, *, data: str, user_id: str) -> tuple[str, str | None]:
    """(toast, new text for the message) for a button press; only the asker's own buttons act."""
    for prefix in (FORGET_YES, FORGET_NO):
        if data.startswith(prefix):
            if data.removeprefix(prefix) != user_id:
                return "This button belongs to someone else.", None
            if prefix == FORGET_NO:
                return "Kept.", "Okay, I forgot nothing."
            counts = forget(conn, settings, user_id, actor=f"telegram:{user_id}")
            total = sum(v for v in counts.values() if isinstance(v, int))
            return "Done.", f"Done: I forgot everything about you ({total} items deleted)."
    return "", None
