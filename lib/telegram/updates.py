"""What Ash does with one Telegram update: the handler the inbox worker is given.

Decodes the stored update and routes it: messages (access check, slash commands, albums,
photos, then a turn of the agent, streamed into a TelegramSink), button presses, and changes
of the bot's membership. The lease loop around it (one chat at a time, retries, /stop, resume
after a crash) is lib/inbox/worker.py, which knows nothing of Telegram.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from lib.agent.contract import TurnInput, TurnResult
from lib.errors import Forbidden, InvalidToken, TelegramError
from lib.inbox import queue as inbox
from lib.inbox.worker import InboxWorker, Permanent
from lib.memory import store
from lib.runtime import Runtime
from lib.telegram import access
from lib.telegram.addressing import addressed_in_group
from lib.telegram.client import TelegramClient
from lib.telegram.commands import COMMANDS, Reply, parse_command, run_callback, run_command
from lib.telegram.media import ALBUM_WAIT, download_photos, gather_album
from lib.telegram.sink import TelegramSink
from lib.telegram.types import UPDATE_DECODER, Message, Update, User

log = logging.getLogger("ash.processor")

# The agent's turn, handed in by whoever wires the server (lib/web/lifespan.py): (turn, sink) -> result.
Runner = Callable[[TurnInput, TelegramSink], Awaitable[TurnResult]]

DENIED = (
    "Sorry, I only talk to people my owner has allowed. Your Telegram id is {user_id}; "
    "ask them to run `ash users allow {user_id}`."
)
FAILED = "Sorry, I could not answer this message; I tried {attempts} times. Please send it again later."
# Commands about one person's own memory: in a group the answer goes to their private chat, so
# the group never reads it (lib/memory/scope.py).
PRIVATE_COMMANDS = frozenset({"memory", "forget"})
SENT_PRIVATELY = "I've answered you in our private chat."
OPEN_PRIVATELY = (
    "I can't write to you privately until you start a chat with me: open {link}, press Start, "
    "then send /{command} there."
)
UNSUPPORTED = {
    "voice": "I can't listen to voice messages yet; please type your message.",
    "audio": "I can't listen to audio yet; please type your message.",
    "video": "I can't watch videos yet; please describe it in text.",
    "video_note": "I can't watch video messages yet; please type your message.",
    "document": "I can't read files yet; please paste the text into the chat.",
    "sticker": "Nice sticker! I can only read text and photos for now.",
}


def _display_name(user: User) -> str:
    return " ".join(part for part in (user.first_name, user.last_name) if part)


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
        # The inbox worker's id: the sink records sent message ids under the worker's claim.
        self.worker_id = worker_id

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

    async def _db(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run `fn(conn, ...)` in a worker thread with that thread's connection."""
        return await asyncio.to_thread(lambda: fn(self.runtime.db.conn(), *args, **kwargs))

    async def me(self) -> dict:
        """getMe, cached: the bot's id and @username (for mentions in groups)."""
        if self._me is None:
            try:
                self._me = await self.client.get_me()
            except TelegramError as exc:
                log.warning("getMe failed (%s); group mentions are not recognised until it works", exc)
                return {"id": self.bot_id, "username": None}
        return self._me

    # -- the worker's Handler ---------------------------------------------------------------
    async def handle(self, claim: inbox.Claim) -> tuple[str, str | None]:
        """Do what the update asks; returns the inbox status and a note."""
        try:
            return await self._handle(claim)
        except Forbidden as exc:
            # Blocked or kicked: a retry cannot help, and the chat is marked so nothing more is sent.
            log.info("chat %s blocked the bot: %s", claim.chat_key, exc.message)
            if claim.chat_key is not None:
                await self._db(access.mark_blocked, claim.chat_key)
            return "failed", f"forbidden: {exc}"
        except InvalidToken as exc:
            raise Permanent(str(exc)) from exc

    async def may_stop(self, stop_payload: bytes, running: inbox.Claim) -> bool:
        """A /stop cancels a running turn only when it is addressed to this bot (`/stop` or
        `/stop@thisbot`), its sender is allowed, and, in a group, it is the running turn's own
        sender (the owner may stop any turn)."""
        try:
            stop = UPDATE_DECODER.decode(stop_payload).message
            turn = UPDATE_DECODER.decode(running.payload).message
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
        if stop.chat.type not in ("group", "supergroup"):
            return True
        owner = self.settings.config.owner
        if owner is not None and str(owner) == str(sender.id):
            return True
        return turn is not None and turn.from_ is not None and turn.from_.id == sender.id

    async def stopped(self, claim: inbox.Claim) -> None:
        """/stop cancelled this chat's running turn."""
        with contextlib.suppress(TelegramError):
            await self.client.send_message(int(claim.chat_key), "Stopped.")

    async def gave_up(self, claim: inbox.Claim) -> None:
        """Every attempt failed: say so once, so the person knows to send it again."""
        if claim.chat_key is not None and self.client is not None:
            with contextlib.suppress(TelegramError):
                await self.client.send_message(int(claim.chat_key), FAILED.format(attempts=claim.attempts))

    async def _handle(self, claim: inbox.Claim) -> tuple[str, str | None]:
        """Do what the update asks; returns the inbox status and a note."""
        try:
            update = UPDATE_DECODER.decode(claim.payload)
        except (msgspec.DecodeError, RecursionError) as exc:
            log.info("skipping update %s: cannot decode it (%s)", claim.update_id, exc)
            return "skipped", "cannot decode"
        if update.message is not None:
            return await self._message(claim, update, update.message)
        if update.callback_query is not None:
            return await self._callback(update)
        if update.my_chat_member is not None and update.my_chat_member.new_chat_member is not None:
            status = update.my_chat_member.new_chat_member.status
            if update.my_chat_member.chat.type == "private":
                await self._db(access.mark_blocked, update.my_chat_member.chat.id, status == "kicked")
            log.info("chat %s: bot is now %s", update.my_chat_member.chat.id, status)
            return "done", f"member: {status}"
        log.info("skipping update %s of kind %s", claim.update_id, claim.kind)
        return "skipped", f"unhandled kind {claim.kind}"

    def _sink(self, claim: inbox.Claim, chat_id: int, chat_type: str, thread_id: int | None) -> TelegramSink:
        group = chat_type in ("group", "supergroup")
        interval = self.config.group_stream_edit_interval if group else self.config.stream_edit_interval

        async def record(message_ids: list[int]) -> None:
            await self._db(inbox.record_reply, self.bot_id, claim.update_id, self.worker_id, str(chat_id), message_ids)

        async def migrated(new_chat_id: int) -> None:
            await self._db(access.mark_migrated, chat_id, new_chat_id)

        return TelegramSink(
            self.client,
            chat_id,
            interval=interval,
            resume_message_ids=claim.reply_ids,
            on_new_message=record,
            on_migrated=migrated,
            message_thread_id=thread_id if group else None,
        )

    async def _reply(self, sink: TelegramSink, reply: Reply) -> None:
        sink.reply_markup = reply.keyboard
        await sink.finish(reply.text)

    async def _message(self, claim: inbox.Claim, update: Update, message: Message) -> tuple[str, str | None]:
        chat, user = message.chat, message.from_
        if user is None or user.is_bot:
            return "skipped", "no human sender"
        group = chat.type in ("group", "supergroup")
        text = message.text or message.caption or ""
        me = await self.me() if group else {}
        if group:
            addressed, text = addressed_in_group(message, text, me)
            if not addressed:
                return "skipped", "group message not addressed to the bot"
        if not await self._db(access.is_allowed, self.settings, user.id, user.username):
            # Nothing is kept for a stranger beyond the one denial in their private chat, and
            # denials are capped across all strangers (a flood of new accounts costs nothing).
            log.info("user %s (@%s) is not allowed", user.id, user.username)
            if not group and await self._db(access.should_tell_denied, chat.id):
                await self._sink(claim, chat.id, chat.type, message.message_thread_id).finish(
                    DENIED.format(user_id=user.id)
                )
            return "done", "not allowed"
        await self._db(access.note_chat, chat.id, chat.type, chat.title)
        if not group:
            # Writing to the bot means it is no longer blocked.
            await self._db(access.mark_blocked, chat.id, False)
        state = await self._db(access.chat_state, chat.id)
        if state and state["blocked_at"]:
            return "skipped", "chat blocked"
        sink = self._sink(claim, chat.id, chat.type, message.message_thread_id)
        command = parse_command(text, me.get("username"))
        if command is not None and command[0] in COMMANDS:

            def command_reply(conn) -> Reply:
                # A turn records who wrote (name, username) itself; a command does it here.
                store.touch_profile(conn, str(user.id), user.username, _display_name(user) or None)
                return run_command(
                    conn,
                    self.settings,
                    name=command[0],
                    user_id=str(user.id),
                    chat_id=str(chat.id),
                    stop_running=lambda: False,
                )

            reply = await self._db(command_reply)
            if group and command[0] in PRIVATE_COMMANDS:
                return await self._answer_privately(claim, message, reply, command[0])
            await self._reply(sink, reply)
            return "done", f"command /{command[0]}"
        for kind, notice in UNSUPPORTED.items():
            if getattr(message, kind) is not None:
                await sink.finish(notice)
                return "done", f"unsupported {kind}"
        messages = [message]
        if message.media_group_id:
            messages = await gather_album(self.runtime.db, self.bot_id, claim, message, self.album_wait)
            text = "\n".join(m.caption for m in messages if m.caption) or text
            if group:
                text = addressed_in_group(message, text, me)[1]
        images = await download_photos(self.client, messages, self.config.photo_max_bytes)
        if not text.strip() and not images:
            return "skipped", "nothing to answer"
        turn = TurnInput(
            provider="telegram",
            chat_id=str(chat.id),
            user_id=str(user.id),
            text=text,
            chat_type=chat.type,
            username=user.username,
            display_name=_display_name(user) or None,
            images=tuple(images),
            update_id=claim.update_id,
        )
        await sink.typing()
        result = await self.runner(turn, sink)
        if not sink.finished:
            await sink.finish(result.text or "…")
        return "done", None if result.ok else "turn reported failure"

    async def _answer_privately(
        self, claim: inbox.Claim, message: Message, reply: Reply, command: str
    ) -> tuple[str, str | None]:
        """Send a command's answer to the sender's private chat and say so in the group; when
        Telegram refuses (they never started the bot, or blocked it: 403), post a link that
        starts the private chat instead. That 403 blocks nothing: the group still gets answers."""
        user, chat, thread = message.from_, message.chat, message.message_thread_id
        try:
            await self._reply(self._sink(claim, user.id, "private", None), reply)
        except Forbidden as exc:
            log.info("user %s has no private chat with the bot (%s); linking it in the group", user.id, exc.message)
            username = (await self.me()).get("username")
            link = f"https://t.me/{username}?start" if username else "a private chat with me"
            notice, note = OPEN_PRIVATELY.format(link=link, command=command), f"command /{command}: no private chat"
        else:
            notice, note = SENT_PRIVATELY, f"command /{command}: answered privately"
        with contextlib.suppress(TelegramError):
            await self.client.send_message(chat.id, notice, message_thread_id=thread)
        return "done", note

    async def _callback(self, update: Update) -> tuple[str, str | None]:
        query = update.callback_query
        user = query.from_
        if not await self._db(access.is_allowed, self.settings, user.id, user.username):
            with contextlib.suppress(TelegramError):
                await self.client.answer_callback_query(query.id)
            return "done", "callback from a user not allowed"
        toast, new_text = await self._db(
            lambda conn: run_callback(conn, self.settings, data=query.data or "", user_id=str(user.id))
        )
        with contextlib.suppress(TelegramError):
            await self.client.answer_callback_query(query.id, toast or None)
        if new_text and query.message is not None:
            await self.client.edit_message_text(query.message.chat.id, query.message.message_id, new_text)
        return "done", f"callback {query.data}"


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
    updates = TelegramUpdates(runtime, runner=runner, client=client, album_wait=album_wait, worker_id=worker)
    return InboxWorker(runtime.db, runtime.settings, updates, answering=updates.answering, worker=worker)
