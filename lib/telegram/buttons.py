"""Inline button presses (callback queries): acted on once, answered once, never retried.

A retry would act a second time, and a message Telegram will not edit stays so however often it
is asked; so once the press has acted, a failure to show its result is logged, not raised.
Stored state decides what a press may do (lib/telegram/commands.py run_callback).
"""

from __future__ import annotations

import contextlib
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from lib.config import Settings
from lib.errors import TelegramError
from lib.telegram.client import TelegramClient
from lib.telegram.commands import run_callback
from lib.telegram.types import CallbackQuery, Message

log = logging.getLogger("ash.processor")

ALREADY_DONE = "Already done."
# Button messages remembered as acted on: a double tap sends two presses before the first one's
# edit removes the buttons, and the second must neither act nor edit again.
REMEMBERED = 1000


class ButtonPresses:
    """Acts on button presses; `client` gives the Bot API client, `db` runs fn(conn) in a thread."""

    def __init__(
        self,
        client: Callable[[], TelegramClient],
        db: Callable[..., Awaitable[Any]],
        settings: Settings,
    ):
        self._client = client
        self._db = db
        self.settings = settings
        self._acted_on: OrderedDict[tuple[int, int], None] = OrderedDict()

    async def press(self, query: CallbackQuery) -> tuple[str, str | None]:
        """Act on a press by an allowed user; returns the inbox status and a note."""
        shown = query.message
        key = (shown.chat.id, shown.message_id) if shown is not None else None
        if key in self._acted_on:
            await self.answer(query, ALREADY_DONE)
            return "done", f"callback {query.data}: already acted on"
        toast, new_text = await self._db(
            lambda conn: run_callback(
                conn,
                self.settings,
                data=query.data or "",
                user_id=str(query.from_.id),
                chat_id=str(shown.chat.id) if shown is not None else None,
                chat_type=shown.chat.type if shown is not None else "private",
            )
        )
        await self.answer(query, toast or None)
        if new_text is None or key is None:
            return "done", f"callback {query.data}"
        self._remember(key)
        try:
            await self._show(shown, new_text)
        except TelegramError as exc:
            log.warning("button %s acted, but its result could not be shown: %s", query.data, exc)
            return "done", f"callback {query.data}: result not shown ({exc.message})"
        return "done", f"callback {query.data}"

    async def answer(self, query: CallbackQuery, toast: str | None) -> None:
        """Stop the button's spinner (once per press), with an optional toast."""
        with contextlib.suppress(TelegramError):
            await self._client().answer_callback_query(query.id, toast)

    async def _show(self, shown: Message, text: str) -> None:
        """Put a press's result in place of the message the button was under."""
        if shown.date == 0:
            # An InaccessibleMessage (deleted, or too old for the bot): it cannot be edited.
            await self._client().send_message(shown.chat.id, text)
        elif shown.text != text:  # an identical edit is refused as "message is not modified"
            await self._client().edit_message_text(shown.chat.id, shown.message_id, text)

    def _remember(self, key: tuple[int, int]) -> None:
        self._acted_on[key] = None
        while len(self._acted_on) > REMEMBERED:
            self._acted_on.popitem(last=False)
