"""Presses on /why's buttons and the 🧠 button, and the correction a Wrong press asks for.

Unlike other buttons, one /why list is pressed again and again (one row per item), so a press
re-draws the list in place (text and buttons) rather than replacing it with a result. The 🧠
button opens the list as a new message: in a private chat there, in a group in the presser's
private chat (what Ash remembers is not read out to the group).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from lib.config import Settings
from lib.errors import Forbidden, TelegramError
from lib.telegram import why
from lib.telegram.client import TelegramClient
from lib.telegram.placement import GROUP_TYPES
from lib.telegram.types import CallbackQuery, Message

log = logging.getLogger("ash.processor")

START_PRIVATELY = "Start a private chat with me first, then press again."
SENT_PRIVATELY = "Sent to our private chat."


class WhyButtons:
    """Acts on /why presses; `client` gives the Bot API client, `db` runs fn(conn) in a thread."""

    def __init__(self, client: Callable[[], TelegramClient], db: Callable[..., Awaitable[Any]], settings: Settings):
        self._client = client
        self._db = db
        self.settings = settings

    async def press(self, query: CallbackQuery) -> tuple[str, str | None]:
        """Act on one press; returns the inbox status and a note."""
        shown = query.message
        presser = str(query.from_.id)
        chat_id = str(shown.chat.id) if shown is not None else presser
        outcome = await self._db(
            lambda conn: why.press(
                conn, self.settings, data=query.data or "", user_id=presser, provider="telegram", chat_id=chat_id
            )
        )
        toast = outcome.toast
        if (query.data or "").startswith(why.OPEN) and outcome.text is not None:
            toast = await self._open(shown, presser, outcome) or toast
        elif outcome.text is not None and shown is not None:
            await self._redraw(shown, outcome)
        if outcome.ask is not None:
            with contextlib.suppress(TelegramError):
                await self._client().send_message(chat_id, outcome.ask)
        with contextlib.suppress(TelegramError):
            await self._client().answer_callback_query(query.id, toast or None)
        return "done", f"callback {query.data}"

    async def _open(self, shown: Message | None, presser: str, outcome: why.Press) -> str | None:
        """Send the list: in the chat of a private answer, privately for a group's."""
        group = shown is not None and shown.chat.type in GROUP_TYPES
        where = presser if group or shown is None else shown.chat.id
        try:
            await self._client().send_message(where, outcome.text, reply_markup=outcome.keyboard)
        except Forbidden:
            return START_PRIVATELY
        except TelegramError as exc:
            log.warning("the /why list could not be sent: %s", exc)
            return None
        return SENT_PRIVATELY if group else None

    async def _redraw(self, shown: Message, outcome: why.Press) -> None:
        """Show the list as it is now, under the same message (an edit; a failure is logged)."""
        try:
            await self._client().edit_message_text(
                shown.chat.id, shown.message_id, outcome.text, reply_markup=outcome.keyboard
            )
        except TelegramError as exc:
            log.warning("a /why press acted, but the list could not be redrawn: %s", exc)
