"""The background worker that turns stored updates into replies.

It wakes after each webhook response, at start-up, every server.tick_interval seconds and on
POST /admin/tick. Each wake claims what may run (one update per chat at a time, in update_id
order; up to telegram.max_concurrent_chats chats at once), renews the leases of running turns,
and acts on /stop for chats whose turn is running. Shutdown cancels running turns and releases
their claims so the next process resumes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import apsw
import msgspec

from lib import access, inbox
from lib.chat_commands import COMMANDS, Reply, parse_command, run_callback, run_command
from lib.errors import AshError, Forbidden, InvalidToken, TelegramError
from lib.memory import store
from lib.telegram import TelegramClient
from lib.telegram_sink import TelegramSink
from lib.telegram_types import UPDATE_DECODER, Message, Update, User
from lib.turn import Image, TurnInput, TurnResult

if TYPE_CHECKING:
    from lib.runtime import Runtime

log = logging.getLogger("ash.processor")

Runner = Callable[["Runtime", TurnInput, TelegramSink], Awaitable[TurnResult]]

# Seconds an album's first photo waits for its siblings (Telegram sends them as separate updates).
ALBUM_WAIT = 1.5
MAX_RETRY_DELAY = 300.0
PRUNE_EVERY = 3600.0

DENIED = (
    "Sorry, I only talk to people my owner has allowed. Your Telegram id is {user_id}; "
    "ask them to run `ash users allow {user_id}`."
)
FAILED = "Sorry, I could not answer this message; I tried {attempts} times. Please send it again later."
UNSUPPORTED = {
    "voice": "I can't listen to voice messages yet; please type your message.",
    "audio": "I can't listen to audio yet; please type your message.",
    "video": "I can't watch videos yet; please describe it in text.",
    "video_note": "I can't watch video messages yet; please type your message.",
    "document": "I can't read files yet; please paste the text into the chat.",
    "sticker": "Nice sticker! I can only read text and photos for now.",
}


@dataclass
class Job:
    """A running update of one chat."""

    claim: inbox.Claim
    task: asyncio.Task | None = None
    renewed_at: float = field(default_factory=time.monotonic)
    stop_requested: bool = False
    lost: bool = False


class Released(Exception):
    """The update was given back on purpose (an album still arriving); not a failure."""


def _utf16_slice(text: str, offset: int, length: int) -> str:
    # Entity offsets count UTF-16 code units (https://core.telegram.org/api/entities).
    data = text.encode("utf-16-le")
    return data[offset * 2 : (offset + length) * 2].decode("utf-16-le", errors="ignore")


def addressed_in_group(message: Message, text: str, me: dict) -> tuple[bool, str]:
    """(whether the bot was mentioned or replied to, the text without the mention)."""
    username = (me.get("username") or "").lower()
    bot_id = me.get("id")
    hit = False
    for entity in message.entities or message.caption_entities:
        piece = _utf16_slice(text, entity.offset, entity.length)
        mentioned = entity.type == "mention" and bool(username) and piece.lower() == "@" + username
        named = entity.type == "text_mention" and entity.user is not None and entity.user.id == bot_id
        if mentioned or named:
            hit = True
        elif entity.type == "bot_command" and entity.offset == 0:
            name, _, target = piece[1:].partition("@")
            if (target and target.lower() == username) or (not target and name.lower() in COMMANDS):
                hit = True
    reply_to = message.reply_to_message
    if reply_to is not None and reply_to.from_ is not None and bot_id is not None and reply_to.from_.id == bot_id:
        hit = True
    if username:
        text = re.sub(rf"@{re.escape(username)}\b", "", text, flags=re.IGNORECASE).strip()
    return hit, text


def _display_name(user: User) -> str:
    return " ".join(part for part in (user.first_name, user.last_name) if part)


def _received(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


class Processor:
    """One per server process; see the module docstring."""

    def __init__(
        self,
        runtime: Runtime,
        *,
        runner: Runner | None = None,
        client: TelegramClient | None = None,
        worker: str | None = None,
        album_wait: float = ALBUM_WAIT,
    ):
        self.runtime = runtime
        self.settings = runtime.settings
        self.config = runtime.settings.config.telegram
        self.bot_id = runtime.settings.bot_id
        self.worker = worker or inbox.worker_id()
        self.album_wait = album_wait
        self._runner = runner
        self._client = client
        self._jobs: dict[int, Job] = {}
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task | None = None
        self._stopping = False
        self._me: dict | None = None
        self._last_sweep = 0.0
        self._last_prune = 0.0

    # -- plumbing ---------------------------------------------------------------------------
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

    def runner(self) -> Runner:
        """The agent's run_turn unless a test injected another."""
        if self._runner is None:
            from lib.agent import run_turn

            self._runner = run_turn
        return self._runner

    async def me(self) -> dict:
        """getMe, cached: the bot's id and @username (for mentions in groups)."""
        if self._me is None:
            try:
                self._me = await self.client.get_me()
            except TelegramError as exc:
                log.warning("getMe failed (%s); group mentions are not recognised until it works", exc)
                return {"id": self.bot_id, "username": None}
        return self._me

    # -- life cycle -------------------------------------------------------------------------
    async def start(self) -> None:
        """Take over claims of dead processes on this host, then start the loop."""
        if not self.answering:
            log.warning("TELEGRAM_BOT_TOKEN is not set: updates are stored but not answered")
        try:
            await self.sweep()
        except (AshError, apsw.Error) as exc:
            # The loop retries every tick; /readyz reports the database meanwhile.
            log.error("update processor: database not usable at start-up: %s", exc)
        self._loop_task = asyncio.create_task(self._loop(), name="ash-processor")
        self.kick()

    def kick(self) -> None:
        """There may be new work: wake the loop (cheap; safe to call from any handler)."""
        self._wake.set()

    async def stop(self) -> None:
        """Shutdown (SIGTERM): cancel running turns and release their claims for the next process."""
        self._stopping = True
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
        tasks = [job.task for job in self._jobs.values() if job.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        try:
            released = await self._db(inbox.release_all, self.bot_id, self.worker)
        except (AshError, apsw.Error) as exc:
            log.error("could not release claims at shutdown (their leases expire instead): %s", exc)
            return
        if released:
            log.info("released %d claimed update(s) for the next process", released)

    async def _loop(self) -> None:
        while not self._stopping:
            try:
                if time.monotonic() - self._last_sweep >= self.settings.config.server.tick_interval:
                    await self.sweep()
                self._wake.clear()  # what arrived before now is in this pump
                await self.pump()
            except Exception:
                log.exception("update processor: unexpected error; continuing")
            # Running turns need their leases renewed and /stop checked about once a second.
            timeout = self.settings.config.server.tick_interval
            if self._jobs:
                timeout = min(timeout, 1.0, self.config.lease_seconds / 3)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)

    async def sweep(self) -> None:
        """Periodic housekeeping: free dead local claims, skip what Ash does not answer, prune."""
        self._last_sweep = time.monotonic()
        freed = await self._db(inbox.release_dead, self.bot_id, self.worker)
        if freed:
            log.info("took over %d update(s) claimed by a process that is gone", freed)
        # New rows of these kinds are stored already skipped; this finds those an older version left.
        skipped = await self._db(inbox.skip_kinds, self.bot_id)
        if skipped:
            kinds = sorted({row["kind"] for row in skipped})
            log.info("skipped %d update(s) Ash does not answer (%s)", len(skipped), ", ".join(kinds))
        if time.monotonic() - self._last_prune >= PRUNE_EVERY or not self._last_prune:
            self._last_prune = time.monotonic()
            pruned = await self._db(inbox.prune, self.config.inbox_retention_days)
            if pruned:
                log.info("pruned %d finished inbox row(s)", pruned)

    async def tick(self) -> dict:
        """POST /admin/tick: sweep and claim now; returns what was started and the inbox counts."""
        await self.sweep()
        claimed = await self.pump()
        return {"claimed": claimed, "running": len(self._jobs), "inbox": await self._db(inbox.counts)}

    async def pump(self) -> int:
        """Renew leases, act on /stop, then claim and start what may run; returns how many started."""
        await self._check_running()
        if not self.answering or self._stopping:
            return 0
        started = 0
        while len(self._jobs) < self.config.max_concurrent_chats:
            claim = await self._db(inbox.claim, self.bot_id, self.worker, self.config.lease_seconds)
            if claim is None:
                break
            job = Job(claim)
            self._jobs[claim.update_id] = job
            job.task = asyncio.create_task(self._run(job), name=f"ash-update-{claim.update_id}")
            started += 1
        return started

    async def drain(self) -> None:
        """Process until nothing is claimable and nothing runs (tests and `ash` one-shots)."""
        while True:
            started = await self.pump()
            tasks = [job.task for job in self._jobs.values() if job.task is not None]
            if tasks:
                await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            elif not started:
                return

    async def _check_running(self) -> None:
        half = self.config.lease_seconds / 2
        for job in list(self._jobs.values()):
            if job.task is None or job.task.done():
                continue
            if time.monotonic() - job.renewed_at >= half:
                if await self._db(
                    inbox.renew, self.bot_id, job.claim.update_id, self.worker, self.config.lease_seconds
                ):
                    job.renewed_at = time.monotonic()
                else:
                    # Someone took the update over after our lease ran out: never answer twice.
                    log.warning("lost the lease on update %s; cancelling its turn", job.claim.update_id)
                    job.lost = True
                    job.task.cancel()
                    continue
            if job.claim.chat_key is not None and job.claim.kind != "stop":
                await self._take_stops(job)

    async def _take_stops(self, job: Job) -> None:
        for row in await self._db(inbox.pending_stops, self.bot_id, job.claim.chat_key):
            if await self._db(inbox.take_pending, self.bot_id, row["update_id"], "stop: cancelled the running turn"):
                log.info("/stop: cancelling update %s in chat %s", job.claim.update_id, job.claim.chat_key)
                job.stop_requested = True
                job.task.cancel()
                with contextlib.suppress(TelegramError):
                    await self.client.send_message(int(job.claim.chat_key), "Stopped.")

    # -- one update -------------------------------------------------------------------------
    async def _run(self, job: Job) -> None:
        claim = job.claim
        try:
            status, note = await self._handle(claim)
            await self._db(inbox.finish, self.bot_id, claim.update_id, self.worker, status, note)
        except asyncio.CancelledError:
            if job.stop_requested:
                await self._db(inbox.finish, self.bot_id, claim.update_id, self.worker, "done", "stopped by /stop")
            elif not job.lost and not self._stopping:
                await self._db(inbox.release, self.bot_id, claim.update_id, self.worker, count_attempt=False)
        except Released:
            pass
        except Forbidden as exc:
            log.info("chat %s blocked the bot: %s", claim.chat_key, exc.message)
            if claim.chat_key is not None:
                await self._db(access.mark_blocked, claim.chat_key)
            await self._db(inbox.finish, self.bot_id, claim.update_id, self.worker, "failed", f"forbidden: {exc}")
        except Exception as exc:
            await self._failed(claim, exc)
        finally:
            self._jobs.pop(claim.update_id, None)
            self.kick()

    async def _failed(self, claim: inbox.Claim, exc: Exception) -> None:
        error = f"{type(exc).__name__}: {exc}"[:500]
        permanent = isinstance(exc, InvalidToken | ImportError)
        if claim.attempts < self.config.max_attempts and not permanent:
            delay = min(2.0**claim.attempts, MAX_RETRY_DELAY)
            log.warning(
                "update %s failed (attempt %d), retrying in %.0f s: %s",
                claim.update_id,
                claim.attempts,
                delay,
                error,
                exc_info=not isinstance(exc, TelegramError),
            )
            await self._db(inbox.release, self.bot_id, claim.update_id, self.worker, delay=delay, error=error)
            return
        log.error("update %s failed for good after %d attempts: %s", claim.update_id, claim.attempts, error)
        # finish() succeeds once per update, so the user is told once.
        finished = await self._db(inbox.finish, self.bot_id, claim.update_id, self.worker, "failed", error)
        if finished and claim.chat_key is not None and self.client is not None:
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
            await self._db(inbox.record_reply, self.bot_id, claim.update_id, self.worker, str(chat_id), message_ids)

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
        await self._db(access.note_chat, chat.id, chat.type, chat.title)
        group = chat.type in ("group", "supergroup")
        if not group:
            # Writing to the bot means it is no longer blocked.
            await self._db(access.mark_blocked, chat.id, False)
        state = await self._db(access.chat_state, chat.id)
        if state and state["blocked_at"]:
            return "skipped", "chat blocked"
        text = message.text or message.caption or ""
        me = await self.me() if group else {}
        if group:
            addressed, text = addressed_in_group(message, text, me)
            if not addressed:
                return "skipped", "group message not addressed to the bot"
        sink = self._sink(claim, chat.id, chat.type, message.message_thread_id)
        if not await self._db(access.is_allowed, self.settings, user.id, user.username):
            log.info("user %s (@%s) is not allowed", user.id, user.username)
            if await self._db(access.should_tell_denied, chat.id):
                await sink.finish(DENIED.format(user_id=user.id))
            return "done", "not allowed"
        await self._db(store.touch_profile, str(user.id), user.username, _display_name(user) or None)
        command = parse_command(text, me.get("username"))
        if command is not None and command[0] in COMMANDS:
            reply = await self._db(
                lambda conn: run_command(
                    conn,
                    self.settings,
                    name=command[0],
                    user_id=str(user.id),
                    chat_id=str(chat.id),
                    stop_running=lambda: False,
                )
            )
            await self._reply(sink, reply)
            return "done", f"command /{command[0]}"
        for kind, notice in UNSUPPORTED.items():
            if getattr(message, kind) is not None:
                await sink.finish(notice)
                return "done", f"unsupported {kind}"
        messages = [message]
        if message.media_group_id:
            messages = await self._album(claim, message)
            text = "\n".join(m.caption for m in messages if m.caption) or text
            if group:
                text = addressed_in_group(message, text, me)[1]
        images = await self._images(messages)
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
        result = await self.runner()(self.runtime, turn, sink)
        if not sink.finished:
            await sink.finish(result.text or "…")
        return "done", None if result.ok else "turn reported failure"

    async def _album(self, claim: inbox.Claim, message: Message) -> list[Message]:
        """This photo and its album siblings; waits (by releasing the claim) while more may arrive."""
        siblings = []
        newest = _received(claim.received_at)
        for row in await self._db(inbox.album_siblings, self.bot_id, claim.chat_key, claim.update_id):
            try:
                sibling = UPDATE_DECODER.decode(row["payload"]).message
            except (msgspec.DecodeError, RecursionError):
                continue
            if sibling is not None and sibling.media_group_id == message.media_group_id:
                siblings.append((row["update_id"], sibling))
                newest = max(newest, _received(row["received_at"]))
        wait = newest + self.album_wait - time.time()
        if wait > 0:
            await self._db(inbox.release, self.bot_id, claim.update_id, self.worker, delay=wait, count_attempt=False)
            raise Released
        taken = [message]
        for update_id, sibling in siblings:
            note = f"part of album answered with update {claim.update_id}"
            if await self._db(inbox.take_pending, self.bot_id, update_id, note):
                taken.append(sibling)
        return taken

    async def _images(self, messages: list[Message]) -> list[Image]:
        """Download each message's largest photo within telegram.photo_max_bytes."""
        limit = self.config.photo_max_bytes
        images = []
        for message in messages:
            sizes = [p for p in message.photo if p.file_size is None or p.file_size <= limit]
            if not sizes:
                continue
            best = max(sizes, key=lambda p: (p.width * p.height, p.file_size or 0))
            try:
                meta = await self.client.get_file(best.file_id)
                if meta.file_path is None or (meta.file_size or 0) > limit:
                    continue
                images.append(Image(await self.client.download(meta.file_path, limit), "image/jpeg"))
            except TelegramError as exc:
                log.warning("could not download a photo: %s", exc)
        return images

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


def get_processor(runtime: Runtime) -> Processor | None:
    """The processor the lifespan started, if any."""
    for service in runtime.services:
        if isinstance(service, Processor):
            return service
    return None
