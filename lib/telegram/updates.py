"""What Ash does with one Telegram update: the handler the inbox worker is given.

Decodes the stored update and routes it: a message to its way through Ash (messages.py), a
button press to Run / Deny (approvals.py) or to the conversation's buttons (buttons.py), a
scheduled task's run (scheduled.py), a group's move to a supergroup, and changes of the bot's
membership. The lease loop around it (one chat at a time, retries, /stop, resume after a crash)
is lib/inbox/worker.py, which knows nothing of Telegram.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import TYPE_CHECKING

import msgspec

from lib.conversation.access import is_allowed
from lib.conversation.commands import parse_command
from lib.errors import BadRequest, Forbidden, InvalidToken, TelegramError
from lib.inbox import queue as inbox
from lib.inbox.worker import InboxWorker, Permanent
from lib.runtime import Runtime
from lib.telegram.bot import Bot, Runner
from lib.telegram.buttons import ButtonPresses
from lib.telegram.chats import mark_blocked
from lib.telegram.client import TelegramClient
from lib.telegram.kinds import MIGRATION, REVIEW, migration
from lib.telegram.media import ALBUM_WAIT
from lib.telegram.messages import Messages
from lib.telegram.placement import CHAT, GROUP_TYPES, Placement
from lib.telegram.types import UPDATE_DECODER, CallbackQuery, Message

if TYPE_CHECKING:
    from lib.telegram.scheduled import ScheduledRuns

log = logging.getLogger("ash.telegram")

FAILED = "Sorry, I could not answer this message ({tries}). Please send it again later."
STOPPED = "Stopped."
# Kinds of update that carry a message someone wrote (gave_up tells them; a button press is not one).
MESSAGE_KINDS = frozenset({"message", "command", "album", "stop"})

Outcome = tuple[str, str | None]


class TelegramUpdates:
    """The inbox worker's handler for Telegram updates (see lib/inbox/worker.py `Handler`)."""

    def __init__(self, bot: Bot, *, album_wait: float = ALBUM_WAIT):
        self.bot = bot
        self.messages = Messages(bot, album_wait)
        self.buttons = ButtonPresses(lambda: bot.client, bot.db, bot.settings)
        self._scheduled: ScheduledRuns | None = None

    @property
    def client(self) -> TelegramClient | None:
        """The Bot API client, or None without a token (updates then wait in the inbox)."""
        return self.bot.client

    @property
    def answering(self) -> bool:
        """Whether updates get answered (a bot token, or a test's client)."""
        return self.bot.answering

    @property
    def scheduled(self) -> ScheduledRuns:
        """What runs fired scheduled tasks; loaded with the first one (cold start does without)."""
        if self._scheduled is None:
            from lib.telegram.scheduled import ScheduledRuns

            self._scheduled = ScheduledRuns(
                self.bot.db,
                self.bot.settings,
                sink_for=self.bot.sink,
                runner=self.bot.runner,
                clock=self.bot.runtime.clock,
            )
        return self._scheduled

    # -- the worker's Handler ---------------------------------------------------------------
    async def handle(self, claim: inbox.Claim) -> Outcome:
        """Do what the update asks; returns the inbox status and a note."""
        # What a turn imports is loaded on the warm-up thread after a start: wait for it here
        # rather than import on the event loop (lib/runtime.py Warmup).
        await self.bot.runtime.ready()
        try:
            status, note = await self._dispatch(claim)
        except Forbidden as exc:
            # Blocked or kicked: a retry cannot help, and the chat is marked so nothing more is sent.
            log.info("chat %s blocked the bot: %s", claim.chat_key, exc.message)
            if claim.chat_key is not None:
                await self.bot.db(mark_blocked, claim.chat_key)
            return "failed", f"forbidden: {exc}"
        except (InvalidToken, BadRequest) as exc:
            # A wrong token, or a request Telegram refuses (400): the same request fails again.
            raise Permanent(f"{type(exc).__name__}: {exc.message}") from exc
        if status == "skipped":
            log.info("skipping update %s: %s", claim.update_id, note)
        return status, note

    async def _dispatch(self, claim: inbox.Claim) -> Outcome:
        """Work Ash queued itself (a scheduled run, a review message), or an update from Telegram."""
        if claim.kind == inbox.SCHEDULED:
            return await self.scheduled.run(claim)
        if claim.kind == REVIEW:
            from lib.telegram import review_message

            return await review_message.send(self.bot, claim)
        return await self._route(claim)

    async def may_stop(self, stop_payload: bytes, running: inbox.Claim) -> bool:
        """A /stop cancels a running turn only when it is addressed to this bot (`/stop` or
        `/stop@thisbot`), its sender is allowed, and, in a group, it is the running turn's own
        sender (the owner may stop any turn)."""
        stop = _message_of(stop_payload)
        if stop is None or stop.from_ is None or stop.from_.is_bot:
            return False
        username = (await self.bot.me()).get("username")
        text = stop.text or ""
        command = parse_command(text, username)
        if command is None or command[0] != "stop":
            return False  # not /stop, or /stop@other_bot
        if "@" in text.split(maxsplit=1)[0] and not username:
            return False  # addressed to a bot by name, and this bot's name is unknown (getMe failed)
        sender = stop.from_
        if not await self.bot.db(is_allowed, self.bot.settings, sender.id, sender.username):
            return False
        if stop.chat.type not in GROUP_TYPES:
            return True
        owner = self.bot.settings.config.owner
        if owner is not None and str(owner) == str(sender.id):
            return True
        return await self._asker(running) == str(sender.id)

    async def _asker(self, claim: inbox.Claim) -> str | None:
        """Whose turn a claim runs: the sender of its message, or the maker of a scheduled task."""
        if claim.kind == inbox.SCHEDULED:
            job = (await self.scheduled.job_of(claim))[1]
            return job.user_id if job is not None else None
        message = _message_of(claim.payload)
        return str(message.from_.id) if message is not None and message.from_ is not None else None

    async def stopped(self, claim: inbox.Claim) -> None:
        """/stop cancelled this chat's running turn: say so where the question was asked."""
        await self._notice(claim, STOPPED)

    async def gave_up(self, claim: inbox.Claim) -> None:
        """Every attempt failed: say so once, so the person knows to send it again. A button
        press gets no such notice: its toast was already shown."""
        if claim.kind == inbox.SCHEDULED and self.client is not None:
            await self.scheduled.gave_up(claim, self.client)
        elif claim.kind in MESSAGE_KINDS and self.client is not None:
            tries = "I tried once" if claim.attempts == 1 else f"I tried {claim.attempts} times"
            await self._notice(claim, FAILED.format(tries=tries))

    async def _notice(self, claim: inbox.Claim, text: str) -> None:
        """A short notice about a message's answer, in its chat, topic and reply thread."""
        if claim.chat_key is None:
            return
        with contextlib.suppress(TelegramError):
            await self.client.send_message(int(claim.chat_key), text, placement=await self._claim_placement(claim))

    async def _claim_placement(self, claim: inbox.Claim) -> Placement:
        """Where notices about a claim go: its message's topic and thread, or its task's topic."""
        if claim.kind == inbox.SCHEDULED:
            from lib.telegram.scheduled import placement_of

            job = (await self.scheduled.job_of(claim))[1]
            return placement_of(job) if job is not None else CHAT
        message = _message_of(claim.payload)
        return await self.bot.placement(message) if message is not None else CHAT

    async def _route(self, claim: inbox.Claim) -> Outcome:
        """Hand the update to what answers its kind; returns the inbox status and a note."""
        try:
            update = UPDATE_DECODER.decode(claim.payload)
        except (msgspec.DecodeError, RecursionError) as exc:
            return "skipped", f"cannot decode it ({exc})"
        if claim.kind == MIGRATION and update.message is not None:
            return await self._chat_moved(update.message)
        if update.message is not None:
            return await self.messages.answer(claim, update.message)
        if update.callback_query is not None:
            return await self._press(claim, update.callback_query)
        member = update.my_chat_member
        if member is not None and member.new_chat_member is not None:
            status = member.new_chat_member.status
            if member.chat.type == "private":
                await self.bot.db(mark_blocked, member.chat.id, status == "kicked")
            log.info("chat %s: bot is now %s", member.chat.id, status)
            return "done", f"member: {status}"
        return "skipped", f"{claim.kind} (Ash does not answer this kind of update)"

    async def _chat_moved(self, message: Message) -> Outcome:
        """A group became a supergroup: its state follows it to the new id (idempotent, so either
        of the two service messages, and the 400 that says the same, may come first)."""
        from lib.telegram.chat_moves import move_chat

        old, new = migration(message)
        counts = await self.bot.db(move_chat, old, new, time.time())
        log.info("chat %s became the supergroup %s: moved %s", old, new, counts)
        return "done", f"chat {old} moved to {new}"

    async def _press(self, claim: inbox.Claim, query: CallbackQuery) -> Outcome:
        if not await self.bot.db(is_allowed, self.bot.settings, query.from_.id, query.from_.username):
            await self.buttons.answer(query, None)
            return "done", "callback from a user not allowed"
        from lib.telegram.approvals import is_approval

        if is_approval(query.data):
            # Run / Deny resumes a parked turn: its answer streams into a new message.
            return await self.bot.approvals.press(
                query, lambda chat_id, chat_type, placement: self.bot.sink(claim, chat_id, chat_type, placement)
            )
        return await self.buttons.press(query)

    async def sweep(self) -> None:
        """Periodic work (the inbox worker's sweep): Run / Deny requests whose time ran out are
        not run; a scheduled task's run that waited on one is reported skipped."""
        from lib.agent import any_action_expired

        # The approval machinery loads only when a request has run out (not at every start).
        if self.answering and await self.bot.db(any_action_expired, self.bot.runtime.clock()):
            await self.bot.approvals.expire()


def _message_of(payload: bytes) -> Message | None:
    """The message a stored update carries, or None (none, or it does not decode)."""
    try:
        return UPDATE_DECODER.decode(payload).message
    except (msgspec.DecodeError, RecursionError):
        return None


def telegram_worker(
    runtime: Runtime,
    *,
    runner: Runner,
    client: TelegramClient | None = None,
    worker: str | None = None,
    album_wait: float = ALBUM_WAIT,
) -> InboxWorker:
    """An inbox worker that answers Telegram updates with `runner` (the agent's turn)."""
    worker = worker or inbox.worker_id()
    bot = Bot(runtime, runner=runner, client=client, worker_id=worker)
    updates = TelegramUpdates(bot, album_wait=album_wait)
    return InboxWorker(
        runtime.db, runtime.settings, updates, answering=updates.answering, worker=worker, clock=runtime.clock
    )
