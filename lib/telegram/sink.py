"""The agent's OutputSink for Telegram: a typing action, then one message edited as the answer grows.

Edits are paced (telegram.stream_edit_interval in private chats, group_stream_edit_interval in
groups) and slow down after a 429. The final text always lands. Each time the answer's messages
change (one is sent, or a part left over is deleted), their ids are handed to `on_new_message`
(which stores them in the inbox) before streaming goes on, so a resumed turn edits those
messages instead of sending more. The final answer is handed to `on_final` just before it is
shown (the inbox keeps it, so an interrupted turn shows it again rather than asking the model
anew). Answers longer than one message continue in further messages;
the first one replies to the question in a group, and all go to its topic (`placement`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from lib.errors import BadRequest, ChatMigrated, RetryAfter, TelegramError
from lib.telegram.client import PARSE_ERROR, TelegramClient
from lib.telegram.format import MAX_MESSAGE_UNITS, plain, render, utf16_len, visible_text
from lib.telegram.placement import CHAT, Placement
from lib.telegram.types import InlineKeyboardMarkup

log = logging.getLogger("ash.telegram")
# Under an answer /stop cut short: what is there is not the whole answer.
STOPPED_MARK = "\n\n_(stopped)_"

# Streaming edits show a cursor so the user sees the answer is still coming. It is added only
# where it fits: it must never push a part over Telegram's limit and into a message of its own.
CURSOR = " …"
# Telegram's 400 when the message an answer replies to no longer exists (worded differently over
# the years: "reply message not found", "replied message not found", "message to be replied not found").
REPLY_GONE = re.compile(r"repl\w* message not found|message to be replied not found", re.IGNORECASE)
# What a message that can no longer be deleted shows instead of stale text.
BLANK = "·"
# How long a message waits for a typing action still in flight (then the action is dropped).
TYPING_GRACE = 0.5
# How long a cancelled turn (shutdown, a restore) waits for a message already on its way to land
# and have its id recorded.
SEND_GRACE = 10.0


@dataclass
class _Part:
    message_id: int
    shown: str  # the HTML (or plain text) last sent
    plain_only: bool = False


@dataclass
class TelegramSink:
    """Streams one answer into one chat."""

    client: TelegramClient
    chat_id: int | str
    interval: float = 1.0
    # A resumed turn passes the messages it had sent; they are edited instead of sending anew.
    resume_message_ids: list[int] = field(default_factory=list)
    on_new_message: Callable[[list[int]], Awaitable[None]] | None = None
    # Told the final answer (its text, and the buttons under it) just before it is shown.
    on_final: Callable[[str, InlineKeyboardMarkup | None], Awaitable[None]] | None = None
    on_migrated: Callable[[int], Awaitable[None]] | None = None
    placement: Placement = CHAT
    # Buttons shown under the last message of the final answer (a command's reply).
    reply_markup: InlineKeyboardMarkup | None = None
    # Telegram HTML shown above the answer in its first message (what a voice note was heard to
    # say: lib/telegram/listening.py); the answer's parts are cut shorter so it still fits.
    heading: str = ""
    # What the answer drew on (lib/memory/provenance.py), once the agent says; `on_sources` is
    # told too, and may put a button under the answer (it sets `reply_markup` before finish).
    sources_id: int | None = None
    on_sources: Callable[[int, int], None] | None = None
    clock: Callable[[], float] = time.monotonic
    parts: list[_Part] = field(default_factory=list)
    _next_edit: float = 0.0
    _finished: bool = False
    _latest: str = ""  # the newest text update() was given, shown or not yet
    _typing: asyncio.Task | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        for message_id in self.resume_message_ids:
            # The old content is unknown; the first sync overwrites it.
            self.parts.append(_Part(message_id, "\0"))

    def sources(self, sources_id: int, count: int) -> None:
        """The answer's prompt held `count` remembered items, recorded as `sources_id`."""
        self.sources_id = sources_id
        if self.on_sources is not None:
            self.on_sources(sources_id, count)

    @property
    def finished(self) -> bool:
        """True once finish() or fail() ran."""
        return self._finished

    @property
    def message_ids(self) -> list[int]:
        """Ids of the messages this answer occupies, in order."""
        return [p.message_id for p in self.parts]

    async def typing(self) -> None:
        """Show "typing…" without waiting for Telegram: the action goes out in the background, so
        neither its round trip nor its retries (429, 5xx) hold up the turn."""
        if self._typing is None or self._typing.done():
            self._typing = asyncio.create_task(self._send_typing(), name=f"ash-typing-{self.chat_id}")

    async def _send_typing(self) -> None:
        try:
            await self.client.send_chat_action(
                self.chat_id, "typing", message_thread_id=self.placement.message_thread_id
            )
        except Exception as exc:  # only the indicator is lost
            log.debug("typing action failed: %s", exc)

    async def _settle_typing(self) -> None:
        """Before a message goes out: an action landing after it would leave "typing…" under the
        answer for five seconds. It is given TYPING_GRACE to land, then dropped."""
        task, self._typing = self._typing, None
        if task is None or task.done():
            return
        await asyncio.wait({task}, timeout=TYPING_GRACE)
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def update(self, text: str) -> None:
        """Show the answer so far, at most once per interval; skipped edits are caught up later."""
        if self._finished or not text.strip():
            return
        self._latest = text
        if self.clock() < self._next_edit:
            return
        try:
            await self._sync(_with_cursor(self._render(text)), final=False)
        except RetryAfter as exc:
            # Flood control: wait it out and edit less often from now on.
            self.interval *= 2
            self._next_edit = self.clock() + max(exc.retry_after, self.interval)
            log.warning("telegram 429 while streaming: next edit in %.0f s", exc.retry_after)
            return
        self._next_edit = self.clock() + self.interval

    async def finish(self, text: str) -> None:
        """Show the final answer: retried through flood control until it lands."""
        self._finished = True
        if self.on_final is not None:
            await self.on_final(text, self.reply_markup)
        await self._sync(self._render(text) or self._render("…"), final=True)

    async def fail(self, text: str) -> None:
        """Replace what was shown with a short error message."""
        self._finished = True
        await self._sync(self._render(text), final=True)

    async def halt(self) -> None:
        """The answer was stopped (/stop): leave what was written so far, without the cursor and
        marked as stopped (read later, it must not pass for a whole answer).

        One attempt, no flood wait: it runs while the chat's next update waits."""
        if self._finished or not self.parts or not self._latest:
            return
        self._finished = True
        try:
            await self._sync(self._render(self._latest + STOPPED_MARK), final=True, retry_flood=False)
        except TelegramError as exc:
            log.info("could not settle the stopped answer: %s", exc)

    def _render(self, text: str) -> list[str]:
        """The text as Telegram HTML messages, the heading (if any) on top of the first."""
        if not self.heading:
            return render(text)
        # The heading and the line break after it count towards the first message's limit.
        parts = render(text, MAX_MESSAGE_UNITS - utf16_len(visible_text(self.heading)) - 1)
        return [f"{self.heading}\n{parts[0]}", *parts[1:]] if parts else []

    async def _sync(self, rendered: list[str], *, final: bool, retry_flood: bool | None = None) -> None:
        await self._settle_typing()
        retry_flood = final if retry_flood is None else retry_flood
        for index, html_text in enumerate(rendered):
            markup = self.reply_markup if final and index == len(rendered) - 1 else None
            if index < len(self.parts):
                part = self.parts[index]
                if part.shown != html_text or markup is not None:
                    await self._edit(part, html_text, reply_markup=markup, retry_flood=retry_flood)
            else:
                where = self.placement if index == 0 else self.placement.without_reply()
                await _to_the_end(self._send_part(html_text, where, markup, retry_flood))
        if final and rendered and len(self.parts) > len(rendered):
            await self._drop_parts(len(rendered))

    async def _send_part(self, html_text: str, where: Placement, markup, retry_flood: bool) -> None:
        """Send one more message and record its id, as one step (see `_to_the_end`)."""
        sent = await self._send(html_text, where, reply_markup=markup, retry_flood=retry_flood)
        self.parts.append(_Part(sent.message_id, html_text, plain_only=sent.plain_only))
        await self._record()

    async def _drop_parts(self, keep: int) -> None:
        """Delete the parts a final answer no longer needs (a resumed turn's, or a re-split's), so
        no stray message is left; one that cannot be deleted any more is blanked instead."""
        extra, self.parts = self.parts[keep:], self.parts[:keep]
        for part in extra:
            try:
                await self._with_migration(lambda chat, part=part: self.client.delete_message(chat, part.message_id))
            except BadRequest as exc:
                log.info("could not delete a left-over part (%s); blanking it", exc.message)
                if part.shown != BLANK:
                    await self._edit(part, BLANK, retry_flood=True)
        await self._record()

    async def _record(self) -> None:
        if self.on_new_message is not None:
            await self.on_new_message(self.message_ids)

    async def _send(self, html_text: str, where: Placement, *, reply_markup=None, retry_flood: bool):
        try:
            return await self._send_formatted(html_text, where, reply_markup=reply_markup, retry_flood=retry_flood)
        except BadRequest as exc:
            if where.reply_to is None or not REPLY_GONE.search(exc.message):
                raise
        # The question was deleted before the answer. In a forum topic Telegram ignores
        # allow_sending_without_reply ("always False for replies in another chat or forum
        # topic"), so the answer goes out replying to nothing, and so does the rest of it.
        log.info("the message answered in chat %s is gone; sending without the reply", self.chat_id)
        self.placement = self.placement.without_reply()
        return await self._send_formatted(
            html_text, where.without_reply(), reply_markup=reply_markup, retry_flood=retry_flood
        )

    async def _send_formatted(self, html_text: str, where: Placement, *, reply_markup=None, retry_flood: bool):
        try:
            sent = await self._with_migration(
                lambda chat: self.client.send_message(
                    chat,
                    html_text,
                    parse_mode="HTML",
                    reply_markup=reply_markup,
                    placement=where,
                    retry_flood=retry_flood,
                )
            )
            return _Sent(sent.message_id, False)
        except BadRequest as exc:
            if PARSE_ERROR not in exc.message:
                raise
            log.warning("telegram could not parse our HTML (%s); sending plain text", exc.message)
        sent = await self._with_migration(
            lambda chat: self.client.send_message(
                chat, plain(html_text), reply_markup=reply_markup, placement=where, retry_flood=retry_flood
            )
        )
        return _Sent(sent.message_id, True)

    async def _edit(self, part: _Part, html_text: str, *, reply_markup=None, retry_flood: bool) -> None:
        if not part.plain_only:
            try:
                await self._with_migration(
                    lambda chat: self.client.edit_message_text(
                        chat,
                        part.message_id,
                        html_text,
                        parse_mode="HTML",
                        reply_markup=reply_markup,
                        retry_flood=retry_flood,
                    )
                )
                part.shown = html_text
                return
            except BadRequest as exc:
                if PARSE_ERROR not in exc.message:
                    raise
                log.warning("telegram could not parse our HTML (%s); editing as plain text", exc.message)
                part.plain_only = True
        await self._with_migration(
            lambda chat: self.client.edit_message_text(
                chat, part.message_id, plain(html_text), reply_markup=reply_markup, retry_flood=retry_flood
            )
        )
        part.shown = html_text

    async def _with_migration(self, call):
        try:
            return await call(self.chat_id)
        except ChatMigrated as exc:
            log.info("chat %s moved to %s", self.chat_id, exc.new_chat_id)
            self.chat_id = exc.new_chat_id
            if self.on_migrated is not None:
                await self.on_migrated(exc.new_chat_id)
            return await call(self.chat_id)


def _with_cursor(parts: list[str]) -> list[str]:
    """The streamed parts with the cursor after the last one, if it still fits in that message."""
    if parts and utf16_len(plain(parts[-1]) + CURSOR) <= MAX_MESSAGE_UNITS:
        return [*parts[:-1], parts[-1] + CURSOR]
    return parts


@dataclass(frozen=True)
class _Sent:
    message_id: int
    plain_only: bool


async def _to_the_end(step: Awaitable[None]) -> None:
    """Run `step` to its end (SEND_GRACE at most) even when the turn is cancelled meanwhile, then
    let the cancellation through. Cancelled between Telegram's answer and the id's record, a turn
    would leave a message its resumed self does not know and sends again beside."""
    task = asyncio.ensure_future(step)
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait({task}, timeout=SEND_GRACE)
        if not task.done():
            task.cancel()
        elif not task.cancelled() and task.exception() is not None:
            log.info("a message on its way when the turn was cancelled did not land: %s", task.exception())
        raise
