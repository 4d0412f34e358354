"""What Ash does with one Telegram update: the handler the inbox worker is given.

Decodes the stored update and routes it: messages (access check, slash commands, albums,
photos, then a turn of the agent, streamed into a TelegramSink), button presses, and changes
of the bot's membership. Every answer goes where the question was asked (its forum topic; in a
group, as a reply to it: lib/telegram/placement.py). The lease loop around it (one chat at a
time, retries, /stop, resume after a crash) is lib/inbox/worker.py, which knows nothing of
Telegram.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import msgspec

from lib.agent import TurnInput, TurnResult
from lib.errors import BadRequest, Forbidden, InvalidToken, TelegramError
from lib.inbox import queue as inbox
from lib.inbox.worker import STOP_REQUESTED, InboxWorker, Permanent
from lib.memory import store
from lib.runtime import Runtime
from lib.telegram import access
from lib.telegram.addressing import addressed_in_group
from lib.telegram.buttons import ButtonPresses
from lib.telegram.client import TelegramClient
from lib.telegram.commands import COMMANDS, Reply, parse_command, run_command
from lib.telegram.context import display_name, outside_content, with_context
from lib.telegram.kinds import (
    MIGRATION,
    READ_CONTENT,
    READ_FILES,
    READ_RECORDINGS,
    SERVICE_CONTENT,
    SERVICE_REASON,
    UNREAD_CONTENT,
    message_content,
    migration,
)
from lib.telegram.listening import hear
from lib.telegram.media import ALBUM_WAIT, download_photos, gather_album
from lib.telegram.placement import CHAT, GROUP_TYPES, Placement, answer_placement
from lib.telegram.reading import Attachment, read_attachment
from lib.telegram.sink import TelegramSink
from lib.telegram.types import UPDATE_DECODER, CallbackQuery, InlineKeyboardMarkup, Message
from lib.threads import Pool

if TYPE_CHECKING:
    from lib.telegram.approvals import ApprovalButtons
    from lib.telegram.scheduled import ScheduledRuns
    from lib.telegram.why_buttons import WhyButtons

log = logging.getLogger("ash.processor")

# The agent's turn, handed in by whoever wires the server (lib/web/lifespan.py): (turn, sink) -> result.
Runner = Callable[[TurnInput, TelegramSink], Awaitable[TurnResult]]

DENIED = (
    "Sorry, I only talk to people my owner has allowed. Your Telegram id is {user_id}; "
    "ask them to run `ash users allow {user_id}`."
)
FAILED = "Sorry, I could not answer this message ({tries}). Please send it again later."
STOPPED = "Stopped."
# Commands about one person's own memory: in a group the answer goes to their private chat, so
# the group never reads it (lib/memory/scope.py).
PRIVATE_COMMANDS = frozenset({"memory", "forget", "why"})
SENT_PRIVATELY = "I've answered you in our private chat."
OPEN_PRIVATELY = (
    "I can't write to you privately until you start a chat with me: open {link}, press Start, "
    "then send /{command} there."
)
# Kinds of update that carry a message someone wrote (gave_up tells them; a button press is not one).
MESSAGE_KINDS = frozenset({"message", "command", "album", "stop"})
# Seconds a getMe answer is trusted: it says whether the bot has topic mode on in private chats.
ME_TTL = 600.0


class TelegramUpdates:
    """The inbox worker's handler for Telegram updates (see lib/inbox/worker.py `Handler`)."""

    def __init__(
        self,
        runtime: Runtime,
        *,
        runner: Runner,
        client: TelegramClient | None = None,
        album_wait: float = ALBUM_WAIT,
        worker_id: str,
    ):
        self.runtime = runtime
        self.settings = runtime.settings
        self.config = runtime.settings.config.telegram
        self.bot_id = runtime.settings.bot_id
        self.album_wait = album_wait
        self.runner = runner
        self._client = client
        self._me: dict | None = None
        self._me_at = 0.0
        self.buttons = ButtonPresses(lambda: self.client, self._db, self.settings)
        self._approvals: ApprovalButtons | None = None
        self._why: WhyButtons | None = None
        self._scheduled: ScheduledRuns | None = None
        # The inbox worker's id: the sink records sent message ids under the worker's claim.
        self.worker_id = worker_id
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
    def approvals(self) -> ApprovalButtons:
        """Run / Deny for risky tool calls; loaded with the first turn (cold start does without)."""
        if self._approvals is None:
            from lib.telegram.approvals import ApprovalButtons

            self._approvals = ApprovalButtons(self.runtime, lambda: self.client, self._db)
        return self._approvals

    @property
    def scheduled(self) -> ScheduledRuns:
        """What runs fired scheduled tasks; loaded with the first one (cold start does without)."""
        if self._scheduled is None:
            from lib.telegram.scheduled import ScheduledRuns

            self._scheduled = ScheduledRuns(self._db, self.settings, sink_for=self._sink, runner=self.runner)
        return self._scheduled

    @property
    def why(self) -> WhyButtons:
        """/why's buttons; loaded with the first press (cold start does without)."""
        if self._why is None:
            from lib.telegram.why_buttons import WhyButtons

            self._why = WhyButtons(lambda: self.client, self._db, self.settings)
        return self._why

    @property
    def answering(self) -> bool:
        """Whether updates get answered (a bot token, or a test's client); unlike `client`, this
        builds nothing, so start-up does not pay for an HTTP client it may not need yet."""
        return self._client is not None or bool(self.settings.secrets.telegram_bot_token)

    async def _db(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run `fn(conn, ...)` in a worker thread with that thread's connection."""
        return await asyncio.to_thread(lambda: fn(self.runtime.db.conn(), *args, **kwargs))

    async def _record(self, fn: Callable[..., Any], *args: Any) -> Any:
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

    async def _placement(self, message: Message) -> Placement:
        """Where the answer to `message` goes. getMe is asked only for a private chat's topic."""
        private_topic = message.is_topic_message and message.chat.type == "private"
        bot_has_topics = bool((await self.me()).get("has_topics_enabled")) if private_topic else False
        return answer_placement(message, bot_has_topics)

    # -- the worker's Handler ---------------------------------------------------------------
    async def handle(self, claim: inbox.Claim) -> tuple[str, str | None]:
        """Do what the update asks; returns the inbox status and a note."""
        # What a turn imports is loaded on the warm-up thread after a start: wait for it here
        # rather than import on the event loop (lib/runtime.py Warmup).
        await self.runtime.ready()
        try:
            status, note = await (self.scheduled.run(claim) if claim.kind == inbox.SCHEDULED else self._handle(claim))
        except Forbidden as exc:
            # Blocked or kicked: a retry cannot help, and the chat is marked so nothing more is sent.
            log.info("chat %s blocked the bot: %s", claim.chat_key, exc.message)
            if claim.chat_key is not None:
                await self._db(access.mark_blocked, claim.chat_key)
            return "failed", f"forbidden: {exc}"
        except (InvalidToken, BadRequest) as exc:
            # A wrong token, or a request Telegram refuses (400): the same request fails again.
            raise Permanent(f"{type(exc).__name__}: {exc.message}") from exc
        if status == "skipped":
            log.info("skipping update %s: %s", claim.update_id, note)
        return status, note

    async def may_stop(self, stop_payload: bytes, running: inbox.Claim) -> bool:
        """A /stop cancels a running turn only when it is addressed to this bot (`/stop` or
        `/stop@thisbot`), its sender is allowed, and, in a group, it is the running turn's own
        sender (the owner may stop any turn)."""
        try:
            stop = UPDATE_DECODER.decode(stop_payload).message
        except (msgspec.DecodeError, RecursionError):
            return False
        if stop is None or stop.from_ is None or stop.from_.is_bot:
            return False
        username = (await self.me()).get("username")
        text = stop.text or ""
        command = parse_command(text, username)
        if command is None or command[0] != "stop":
            return False  # not /stop, or /stop@other_bot
        if "@" in text.split(maxsplit=1)[0] and not username:
            return False  # addressed to a bot by name, and this bot's name is unknown (getMe failed)
        sender = stop.from_
        if not await self._db(access.is_allowed, self.settings, sender.id, sender.username):
            return False
        if stop.chat.type not in GROUP_TYPES:
            return True
        owner = self.settings.config.owner
        if owner is not None and str(owner) == str(sender.id):
            return True
        return await self._asker(running) == str(sender.id)

    async def _asker(self, claim: inbox.Claim) -> str | None:
        """Whose turn a claim runs: the sender of its message, or the maker of a scheduled task."""
        if claim.kind == inbox.SCHEDULED:
            job = (await self.scheduled.job_of(claim))[1]
            return job.user_id if job is not None else None
        try:
            message = UPDATE_DECODER.decode(claim.payload).message
        except (msgspec.DecodeError, RecursionError):
            return None
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
        try:
            message = UPDATE_DECODER.decode(claim.payload).message
        except (msgspec.DecodeError, RecursionError):
            return CHAT
        return await self._placement(message) if message is not None else CHAT

    async def _handle(self, claim: inbox.Claim) -> tuple[str, str | None]:
        """Do what the update asks; returns the inbox status and a note."""
        try:
            update = UPDATE_DECODER.decode(claim.payload)
        except (msgspec.DecodeError, RecursionError) as exc:
            return "skipped", f"cannot decode it ({exc})"
        if claim.kind == MIGRATION and update.message is not None:
            return await self._chat_moved(update.message)
        if update.message is not None:
            return await self._message(claim, update.message)
        if update.callback_query is not None:
            return await self._callback(claim, update.callback_query)
        if update.my_chat_member is not None and update.my_chat_member.new_chat_member is not None:
            status = update.my_chat_member.new_chat_member.status
            if update.my_chat_member.chat.type == "private":
                await self._db(access.mark_blocked, update.my_chat_member.chat.id, status == "kicked")
            log.info("chat %s: bot is now %s", update.my_chat_member.chat.id, status)
            return "done", f"member: {status}"
        return "skipped", f"{claim.kind} (Ash does not answer this kind of update)"

    async def _chat_moved(self, message: Message) -> tuple[str, str | None]:
        """A group became a supergroup: its state follows it to the new id (idempotent, so either
        of the two service messages, and the 400 that says the same, may come first)."""
        from lib.telegram.chat_moves import move_chat

        old, new = migration(message)
        counts = await self._db(move_chat, old, new, time.time())
        log.info("chat %s became the supergroup %s: moved %s", old, new, counts)
        return "done", f"chat {old} moved to {new}"

    def _sink(self, claim: inbox.Claim, chat_id: int, chat_type: str, placement: Placement) -> TelegramSink:
        group = chat_type in GROUP_TYPES
        interval = self.config.group_stream_edit_interval if group else self.config.stream_edit_interval

        async def record(message_ids: list[int]) -> None:
            ids = (self.bot_id, claim.update_id, self.worker_id)
            await self._record(inbox.record_reply, *ids, str(chat_id), message_ids)

        async def final(text: str, markup: InlineKeyboardMarkup | None) -> None:
            if markup is not None and _asks_approval(markup):
                return  # a parked turn: its Run / Deny press resumes it, not a second run
            answer = msgspec.json.encode({"text": text, "markup": markup}).decode()
            await self._record(inbox.record_answer, self.bot_id, claim.update_id, self.worker_id, answer)

        async def migrated(new_chat_id: int) -> None:
            from lib.telegram.chat_moves import move_chat

            # Everything the group has (memory, history, tasks, its /model pick) follows it.
            await self._db(move_chat, chat_id, new_chat_id, time.time())

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

            def offer(sources_id: int, count: int) -> None:
                # A small 🧠 N under an answer that used memory opens the /why list (lib/telegram/why.py).
                if count:
                    from lib.telegram.why import sources_button

                    sink.reply_markup = sources_button(sources_id, count)

            sink.on_sources = offer
        return sink

    async def _reply(self, sink: TelegramSink, reply: Reply) -> None:
        sink.reply_markup = reply.keyboard
        await sink.finish(reply.text)

    async def _message(self, claim: inbox.Claim, message: Message) -> tuple[str, str | None]:
        chat, user = message.chat, message.from_
        if user is None or user.is_bot:
            return "skipped", "a message with no human sender"
        group = chat.type in GROUP_TYPES
        text = message.text or message.caption or ""
        me = await self.me() if group else {}
        if group:
            addressed, text = addressed_in_group(message, text, me)
            if not addressed:
                return "skipped", "a group message not addressed to the bot"
        sink = self._sink(claim, chat.id, chat.type, await self._placement(message))
        if not await self._db(access.is_allowed, self.settings, user.id, user.username):
            # Nothing is kept for a stranger beyond the one denial in their private chat, and
            # denials are capped across all strangers (a flood of new accounts costs nothing).
            log.info("user %s (@%s) is not allowed", user.id, user.username)
            if not group and await self._db(access.should_tell_denied, chat.id):
                await sink.finish(DENIED.format(user_id=user.id))
            return "done", "not allowed"
        await self._db(access.note_chat, chat.id, chat.type, chat.title)
        if not group:
            # Writing to the bot means it is no longer blocked.
            await self._db(access.mark_blocked, chat.id, False)
        state = await self._db(access.chat_state, chat.id)
        if state and state["blocked_at"]:
            return "skipped", "the chat blocked the bot"
        command = parse_command(text, me.get("username"))
        if command is not None and command[0] in COMMANDS:
            return await self._command(claim, message, sink, *command)
        if message.text and not group:
            corrected = await self._correction(message)
            if corrected is not None:
                await sink.finish(corrected)
                return "done", "a correction from /why"
        content = message_content(message)
        if content in UNREAD_CONTENT:
            await sink.finish(UNREAD_CONTENT[content])
            return "done", f"unsupported {content}"
        if content in SERVICE_CONTENT:  # stored pending by an older version; new ones never get here
            return "skipped", f"{content}, {SERVICE_REASON}"
        if content not in READ_CONTENT:
            return "skipped", "a message with no content Ash knows (newer than Bot API 10.1)"
        if content in READ_RECORDINGS:
            heard = await hear(self.client, self.settings, message, content, sink, text)
            if isinstance(heard, str):
                return "done", heard  # answered already: why it could not be heard
            # Each recording is a turn of its own, also when sent as an album of audio files.
            message = msgspec.structs.replace(message, media_group_id=None)
            return await self._turn(claim, message, sink, heard.text, me)
        if content in READ_FILES:
            attachment = await read_attachment(self.client, self.runtime, message, sink)
            if isinstance(attachment, str):
                return "done", attachment  # answered already: why it could not be read
            # Each file is a turn of its own, also when sent as an album of files.
            message = msgspec.structs.replace(message, media_group_id=None)
            return await self._turn(claim, message, sink, text, me, attachment=attachment)
        return await self._turn(claim, message, sink, text, me)

    async def _command(
        self, claim: inbox.Claim, message: Message, sink: TelegramSink, name: str, args: str
    ) -> tuple[str, str | None]:
        user, chat = message.from_, message.chat
        # A command, like a new message, answers a waiting Run / Deny with "not run" (and /forget
        # must not leave a call holding the person's words, ready to run on an old button).
        await self.approvals.supersede("telegram", str(chat.id), str(user.id))

        def command_reply(conn) -> Reply:
            # A turn records who wrote (name, username) itself; a command does it here.
            store.touch_profile(conn, str(user.id), user.username, display_name(user) or None)
            return run_command(
                conn,
                self.settings,
                name=name,
                args=args,
                user_id=str(user.id),
                chat_id=str(chat.id),
                chat_type=chat.type,
                stop_running=lambda: False,
                reply_to=message.reply_to_message.message_id if message.reply_to_message is not None else None,
            )

        reply = await self._db(command_reply)
        if chat.type in GROUP_TYPES and name in PRIVATE_COMMANDS:
            return await self._answer_privately(claim, message, reply, name, sink.placement)
        await self._reply(sink, reply)
        return "done", f"command /{name}"

    async def _correction(self, message: Message) -> str | None:
        """After Wrong under /why, the person's next message is the right version: stored, and
        answered with what changed; None when no correction was asked for."""
        from lib.telegram import why

        chat_id, user_id = str(message.chat.id), str(message.from_.id)

        def apply(conn) -> str | None:
            waiting = why.waiting_correction(conn, provider="telegram", chat_id=chat_id, user_id=user_id)
            if waiting is None:
                return None
            return why.apply_correction(
                conn, self.settings, waiting, message.text, provider="telegram", user_id=user_id
            )

        return await self._db(apply)

    async def _turn(
        self,
        claim: inbox.Claim,
        message: Message,
        sink: TelegramSink,
        text: str,
        me: dict,
        attachment: Attachment | None = None,
    ) -> tuple[str, str | None]:
        """A turn of the agent: the message (an album's photos with it) streamed into `sink`."""
        if claim.answer is not None:
            return await self._answered_before(claim, sink)
        messages = [message]
        if message.media_group_id:
            messages = await gather_album(self.runtime.db, self.bot_id, claim, message, self.album_wait)
            text = "\n".join(m.caption for m in messages if m.caption) or text
            if message.chat.type in GROUP_TYPES:
                text = addressed_in_group(message, text, me)[1]
        images = await download_photos(self.client, messages, self.config.photo_max_bytes)
        if not text.strip() and not images and attachment is None:
            return "skipped", "nothing to answer"
        user = message.from_
        turn = TurnInput(
            provider="telegram",
            chat_id=str(message.chat.id),
            user_id=str(user.id),
            text=with_context(message, text, me.get("id") or self.bot_id),
            chat_type=message.chat.type,
            username=user.username,
            display_name=display_name(user) or None,
            images=tuple(images),
            update_id=claim.update_id,
            message_thread_id=sink.placement.message_thread_id,
            direct_messages_topic_id=sink.placement.direct_messages_topic_id,
            untrusted=outside_content(message, me.get("id") or self.bot_id),
            # A forward's text is someone else's words; otherwise what the person typed or said.
            typed_text="" if message.forward_origin is not None else text,
        )
        if attachment is not None:
            turn = attachment.into(turn)
        # Writing again instead of answering Run / Deny means the waiting call is not run.
        await self.approvals.supersede(turn.provider, turn.chat_id, turn.user_id)
        await sink.typing()
        try:
            result = await self.runner(turn, sink)
        except asyncio.CancelledError as cancelled:
            if cancelled.args == (STOP_REQUESTED,):
                await sink.halt()  # what was written stays, without the streaming cursor
            raise
        if not sink.finished:
            await sink.finish(result.text or "…")
        if str(sink.chat_id) != turn.chat_id:
            from lib.telegram.chat_moves import move_chat

            # The group became a supergroup while this turn ran (a 400 said so): what the turn
            # stored under the old id follows the rest of the chat.
            await self._db(move_chat, turn.chat_id, sink.chat_id, time.time())
        if sink.sources_id is not None and sink.message_ids:
            from lib.memory.provenance import attach_replies

            # /why in reply to any part of this answer finds what it drew on.
            await self._db(attach_replies, sink.sources_id, sink.message_ids)
        if result.waiting_for is not None:
            await self.approvals.shown(result.waiting_for, sink)
        return "done", None if result.ok else "turn reported failure"

    async def _answered_before(self, claim: inbox.Claim, sink: TelegramSink) -> tuple[str, str | None]:
        """An earlier run of this turn got as far as its final answer and was interrupted (killed,
        shut down, stopped for a restore): show that answer again, as it was, rather than ask the
        model anew and stream a new one over it. Its exchange was stored before it was shown."""
        answer = msgspec.json.decode(claim.answer)
        sink.reply_markup = msgspec.convert(answer["markup"], InlineKeyboardMarkup) if answer["markup"] else None
        log.info("update %s: its answer was ready before an interruption; showing it again", claim.update_id)
        await sink.finish(answer["text"])
        return "done", "answered before an interruption"

    async def _answer_privately(
        self, claim: inbox.Claim, message: Message, reply: Reply, command: str, placement: Placement
    ) -> tuple[str, str | None]:
        """Send a command's answer to the sender's private chat and say so in the group; when
        Telegram refuses (they never started the bot, or blocked it: 403), post a link that
        starts the private chat instead. That 403 blocks nothing: the group still gets answers."""
        user, chat = message.from_, message.chat
        try:
            await self._reply(self._sink(claim, user.id, "private", CHAT), reply)
        except Forbidden as exc:
            log.info("user %s has no private chat with the bot (%s); linking it in the group", user.id, exc.message)
            username = (await self.me()).get("username")
            link = f"https://t.me/{username}?start" if username else "a private chat with me"
            notice, note = OPEN_PRIVATELY.format(link=link, command=command), f"command /{command}: no private chat"
        else:
            notice, note = SENT_PRIVATELY, f"command /{command}: answered privately"
        with contextlib.suppress(TelegramError):
            await self.client.send_message(chat.id, notice, placement=placement)
        return "done", note

    async def _callback(self, claim: inbox.Claim, query: CallbackQuery) -> tuple[str, str | None]:
        if not await self._db(access.is_allowed, self.settings, query.from_.id, query.from_.username):
            await self.buttons.answer(query, None)
            return "done", "callback from a user not allowed"
        if (query.data or "").startswith("why:"):
            return await self.why.press(query)
        from lib.telegram.approvals import is_approval

        if is_approval(query.data):
            # Run / Deny resumes a parked turn: its answer streams into a new message.
            return await self.approvals.press(
                query, lambda chat_id, chat_type, placement: self._sink(claim, chat_id, chat_type, placement)
            )
        return await self.buttons.press(query)

    async def sweep(self) -> None:
        """Periodic work (the inbox worker's sweep): Run / Deny requests whose time ran out are
        not run; a scheduled task's run that waited on one is reported skipped."""
        from lib.agent import any_action_expired

        # The approval machinery loads only when a request has run out (not at every start).
        if self.answering and await self._db(any_action_expired):
            await self.approvals.expire()


def _asks_approval(markup: InlineKeyboardMarkup) -> bool:
    from lib.telegram.approvals import is_approval

    return any(is_approval(button.callback_data) for row in markup.inline_keyboard for button in row)


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
    updates = TelegramUpdates(
        runtime,
        runner=runner,
        client=client,
        album_wait=album_wait,
        worker_id=worker,
    )
    return InboxWorker(runtime.db, runtime.settings, updates, answering=updates.answering, worker=worker)
