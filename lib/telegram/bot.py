"""What every part of the Telegram adapter shares: the Bot API client, the bot's own getMe, a
database call on a worker thread, where an answer goes, and the sink that streams it.

The inbox handler (updates.py), one message's way (messages.py), button presses (buttons.py),
Run / Deny (approvals.py) and scheduled runs (scheduled.py) each take a Bot rather than passing
these around one by one.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import msgspec

from lib.agent import TurnInput, TurnResult
from lib.errors import TelegramError
from lib.inbox import queue as inbox
from lib.runtime import Runtime
from lib.telegram.client import TelegramClient
from lib.telegram.placement import GROUP_TYPES, Placement, answer_placement
from lib.telegram.sink import TelegramSink
from lib.telegram.types import InlineKeyboardMarkup, Message
from lib.threads import Pool

if TYPE_CHECKING:
    from lib.telegram.approvals import ApprovalButtons

log = logging.getLogger("ash.telegram")

# The agent's turn, handed in by whoever wires the server (lib/web/lifespan.py): (turn, sink) -> result.
Runner = Callable[[TurnInput, TelegramSink], Awaitable[TurnResult]]
# Seconds a getMe answer is trusted: it says whether the bot has topic mode on in private chats.
ME_TTL = 600.0


class Bot:
    """The adapter's shared state for one inbox worker (`worker_id`: the sink records sent
    message ids under the worker's claim)."""

    def __init__(self, runtime: Runtime, *, runner: Runner, client: TelegramClient | None, worker_id: str):
        self.runtime = runtime
        self.settings = runtime.settings
        self.config = runtime.settings.config.telegram
        self.bot_id = runtime.settings.bot_id
        self.runner = runner
        self.worker_id = worker_id
        self._client = client
        self._me: dict | None = None
        self._me_at = 0.0
        self._approvals: ApprovalButtons | None = None
        self._records = Pool("ash-reply-records", 1)

    @property
    def client(self) -> TelegramClient | None:
        """The Bot API client, or None without a token (updates then wait in the inbox)."""
        if self._client is None and self.settings.secrets.telegram_bot_token:
            self._client = TelegramClient(
                self.runtime.http, self.settings.secrets.telegram_bot_token, self.settings.secrets.telegram_api_base
            )
        return self._client

    @property
    def answering(self) -> bool:
        """Whether updates get answered (a bot token, or a test's client); unlike `client`, this
        builds nothing, so start-up does not pay for an HTTP client it may not need yet."""
        return self._client is not None or bool(self.settings.secrets.telegram_bot_token)

    @property
    def approvals(self) -> ApprovalButtons:
        """Run / Deny for risky tool calls; loaded with the first turn (cold start does without)."""
        if self._approvals is None:
            from lib.telegram.approvals import ApprovalButtons

            self._approvals = ApprovalButtons(self.runtime, lambda: self.client, self.db)
        return self._approvals

    async def db(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run `fn(conn, ...)` in a worker thread with that thread's connection."""
        return await asyncio.to_thread(lambda: fn(self.runtime.db.conn(), *args, **kwargs))

    async def record(self, fn: Callable[..., Any], *args: Any) -> Any:
        """What a turn has shown (its messages' ids, its final answer), written to its inbox row in
        a thread kept for that (lib/threads.py). Queued behind the turns' other database work, the
        id of a message Telegram had just shown waited up to ~100 ms to be written (seen in the
        soak): a process killed meanwhile left a message its next run did not know of, and sent
        another beside it. Telegram gives no way to find such a message again, so the wait is
        kept short instead."""
        return await self._records.run(lambda: fn(self.runtime.db.conn(), *args))

    async def me(self) -> dict:
        """getMe, cached for ME_TTL: the bot's @username (mentions in groups) and whether it has
        topic mode on in private chats (has_topics_enabled, which the owner can switch)."""
        if self._me is None or time.monotonic() - self._me_at > ME_TTL:
            try:
                self._me = await self.client.get_me()
            except TelegramError as exc:
                log.warning("getMe failed (%s); group mentions are not recognised until it works", exc)
                return self._me or {"id": self.bot_id, "username": None}
            self._me_at = time.monotonic()
        return self._me

    async def placement(self, message: Message) -> Placement:
        """Where the answer to `message` goes. getMe is asked only for a private chat's topic."""
        private_topic = message.is_topic_message and message.chat.type == "private"
        bot_has_topics = bool((await self.me()).get("has_topics_enabled")) if private_topic else False
        return answer_placement(message, bot_has_topics)

    def sink(self, claim: inbox.Claim, chat_id: int, chat_type: str, placement: Placement) -> TelegramSink:
        """The sink an answer to `claim` streams into: the messages it sends are recorded under the
        claim (a run resumed after a crash edits them instead of sending again)."""
        group = chat_type in GROUP_TYPES
        interval = self.config.group_stream_edit_interval if group else self.config.stream_edit_interval

        ids = (self.bot_id, claim.update_id, self.worker_id)

        async def record(message_ids: list[int]) -> None:
            await self.record(inbox.record_reply, *ids, str(chat_id), message_ids)

        async def final(text: str, markup: InlineKeyboardMarkup | None) -> None:
            if markup is not None and _asks_approval(markup):
                return  # a parked turn: its Run / Deny press resumes it, not a second run
            answer = msgspec.json.encode({"text": text, "markup": markup}).decode()
            await self.record(inbox.record_answer, *ids, answer)

        async def migrated(new_chat_id: int) -> None:
            from lib.telegram.chat_moves import move_chat

            # Everything the group has (memory, history, tasks, its /model pick) follows it.
            await self.db(move_chat, chat_id, new_chat_id, time.time())

        sink = TelegramSink(
            self.client,
            chat_id,
            interval=interval,
            resume_message_ids=claim.reply_ids,
            on_new_message=record,
            on_final=final,
            on_migrated=migrated,
            placement=placement,
        )
        if self.config.memory_button == "always" or (self.config.memory_button == "private" and not group):
            sink.on_sources = lambda sources_id, count: _offer_sources(sink, sources_id, count)
        return sink


def _offer_sources(sink: TelegramSink, sources_id: int, count: int) -> None:
    """A small 🧠 N under an answer that used memory opens the /why list (lib/conversation/why.py)."""
    if count:
        from lib.conversation.why import sources_button
        from lib.telegram.keyboards import one_button

        sink.reply_markup = one_button(sources_button(sources_id, count))


def _asks_approval(markup: InlineKeyboardMarkup) -> bool:
    from lib.telegram.approvals import is_approval

    return any(is_approval(button.callback_data) for row in markup.inline_keyboard for button in row)
