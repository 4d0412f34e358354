"""The conversation's buttons as Telegram draws them: an inline keyboard under the message, each
button's data coming back as a callback query when pressed (lib/conversation/replies.py)."""

from __future__ import annotations

from lib.conversation.replies import Button, Reply
from lib.telegram.format import render, visible_text
from lib.telegram.types import InlineKeyboardButton, InlineKeyboardMarkup, Message


def keyboard(rows: tuple[tuple[Button, ...], ...]) -> InlineKeyboardMarkup | None:
    """Rows of buttons as an inline keyboard; None for no buttons (the message then has none)."""
    if not rows:
        return None
    return InlineKeyboardMarkup(
        inline_keyboard=[[InlineKeyboardButton(text=b.label, callback_data=b.data) for b in row] for row in rows]
    )


def one_button(button: Button) -> InlineKeyboardMarkup:
    """A keyboard of a single button."""
    return InlineKeyboardMarkup(inline_keyboard=[[InlineKeyboardButton(text=button.label, callback_data=button.data)]])


def shows(message: Message, html_text: str, markup: InlineKeyboardMarkup | None) -> bool:
    """Whether `message` already shows this text and these buttons: an edit would change nothing
    (Telegram refuses it as "message is not modified", and it would cost a request)."""
    return message.text == visible_text(html_text) and message.reply_markup == markup


def as_html(reply: Reply) -> str:
    """A press's new text as one Telegram HTML message (a button's answer is always short)."""
    return render(reply.text)[0]
