"""Button presses (callback queries) on the conversation's buttons: acted on once, answered once,
never retried.

What a press may do is the conversation's to decide (lib/conversation/commands.py run_press,
from stored state); this draws what it did: the toast, the message under the button redrawn, and
a new message for the presser, sent to their private chat when the press was in a group (what
/why lists is not read out to the group). A retry would act a second time, and a message
Telegram will not edit stays so however often it is asked; so once the press has acted, a
failure to show its result is logged, not raised.
"""

from __future__ import annotations

import contextlib
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from lib.config import Settings
from lib.conversation.commands import run_press
from lib.conversation.replies import Asker, Press, Reply
from lib.errors import Forbidden, TelegramError
from lib.telegram.client import TelegramClient
from lib.telegram.keyboards import as_html, keyboard, shows
from lib.telegram.placement import GROUP_TYPES
from lib.telegram.types import CallbackQuery, Message

log = logging.getLogger("ash.telegram")

ALREADY_DONE = "Already done."
START_PRIVATELY = "Start a private chat with me first, then press again."
SENT_PRIVATELY = "Sent to our private chat."
# Button messages remembered as acted on: a double tap sends two presses before the first one's
# edit removes the buttons, and the second must neither act nor edit again.
REMEMBERED = 1000


class ButtonPresses:
    """Acts on button presses; `client` gives the Bot API client, `db` runs fn(conn) in a thread."""

    def __init__(self, client: Callable[[], TelegramClient], db: Callable[..., Awaitable[Any]], settings: Settings):
        self._client = client
        self._db = db
        self.settings = settings
        self._acted_on: OrderedDict[tuple[int, int], None] = OrderedDict()

    async def press(self, query: CallbackQuery) -> tuple[str, str | None]:
        """Act on a press by an allowed user; returns the inbox status and a note."""
        shown, data = query.message, query.data or ""
        if shown is None:  # a message sent in inline mode, which Ash never uses
            await self.answer(query, None)
            return "done", f"callback {data}: no message"
        key = (shown.chat.id, shown.message_id)
        if key in self._acted_on:
            await self.answer(query, ALREADY_DONE)
            return "done", f"callback {data}: already acted on"
        asker = Asker("telegram", str(shown.chat.id), str(query.from_.id), shown.chat.type)
        outcome: Press = await self._db(lambda conn: run_press(conn, self.settings, asker, data))
        notice = outcome.notice
        if outcome.message is not None:
            notice = await self._send_to_presser(shown, asker.user_id, outcome.message) or notice
        await self.answer(query, notice or None)
        if outcome.reply is None:
            return "done", f"callback {data}"
        if not outcome.reply.buttons:
            self._remember(key)
        try:
            await self._show(shown, outcome.reply)
        except TelegramError as exc:
            log.warning("button %s acted, but its result could not be shown: %s", data, exc)
            return "done", f"callback {data}: result not shown ({exc.message})"
        return "done", f"callback {data}"

    async def answer(self, query: CallbackQuery, toast: str | None) -> None:
        """Stop the button's spinner (once per press), with an optional toast."""
        with contextlib.suppress(TelegramError):
            await self._client().answer_callback_query(query.id, toast)

    async def _show(self, shown: Message, reply: Reply) -> None:
        """Put a press's result in place of the message the button was under."""
        html_text, markup = as_html(reply), keyboard(reply.buttons)
        if shown.date == 0:
            # An InaccessibleMessage (deleted, or too old for the bot): it cannot be edited.
            await self._client().send_message(shown.chat.id, html_text, parse_mode="HTML", reply_markup=markup)
        elif not shows(shown, html_text, markup):
            await self._client().edit_message_text(
                shown.chat.id, shown.message_id, html_text, parse_mode="HTML", reply_markup=markup
            )

    async def _send_to_presser(self, shown: Message, presser: str, reply: Reply) -> str | None:
        """Send a new message to the presser: in the chat of a private press, privately for a
        group's. Returns the toast that says where it went, when that needs saying."""
        group = shown.chat.type in GROUP_TYPES
        where = presser if group else shown.chat.id
        try:
            await self._client().send_message(
                where, as_html(reply), parse_mode="HTML", reply_markup=keyboard(reply.buttons)
            )
        except Forbidden:
            return START_PRIVATELY
        except TelegramError as exc:
            log.warning("a button's message could not be sent: %s", exc)
            return None
        return SENT_PRIVATELY if group else None

    def _remember(self, key: tuple[int, int]) -> None:
        self._acted_on[key] = None
        while len(self._acted_on) > REMEMBERED:
            self._acted_on.popitem(last=False)
