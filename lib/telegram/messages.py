"""One message's way through Ash: the gate (may its sender talk here?), a slash command, the
correction /why asked for, what kind of content it is, and the agent's turn; an answer about
someone's own memory goes to their private chat.

Every answer goes where the question was asked (its forum topic; in a group, as a reply to it:
placement.py). The inbox handler around it is updates.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import msgspec

from lib.agent import TurnInput
from lib.conversation.commands import BY_NAME, Ask, parse_command, run_command
from lib.conversation.replies import Asker, Reply
from lib.errors import Forbidden, TelegramError
from lib.inbox import queue as inbox
from lib.inbox.worker import STOP_REQUESTED
from lib.memory import store
from lib.telegram.addressing import addressed_in_group
from lib.telegram.bot import Bot
from lib.telegram.chats import BLOCKED, DENIED, TELL_DENIED, admit
from lib.telegram.context import display_name, outside_content, with_context
from lib.telegram.keyboards import keyboard
from lib.telegram.kinds import (
    READ_CONTENT,
    READ_FILES,
    READ_RECORDINGS,
    SERVICE_CONTENT,
    SERVICE_REASON,
    UNREAD_CONTENT,
    message_content,
)
from lib.telegram.listening import hear
from lib.telegram.media import download_photos, gather_album
from lib.telegram.placement import CHAT, GROUP_TYPES
from lib.telegram.reading import Attachment, read_attachment
from lib.telegram.sink import TelegramSink
from lib.telegram.types import InlineKeyboardMarkup, Message

log = logging.getLogger("ash.telegram")

DENIED_TEXT = (
    "Sorry, I only talk to people my owner has allowed. Your Telegram id is {user_id}; "
    "ask them to run `ash users allow {user_id}`."
)
SENT_PRIVATELY = "I've answered you in our private chat."
OPEN_PRIVATELY = (
    "I can't write to you privately until you start a chat with me: open {link}, press Start, "
    "then send /{command} there."
)

Outcome = tuple[str, str | None]


def asker_of(message: Message) -> Asker:
    """Who wrote `message`, and where."""
    return Asker("telegram", str(message.chat.id), str(message.from_.id), message.chat.type)


class Messages:
    """Answers the messages people write (the inbox handler hands each one here)."""

    def __init__(self, bot: Bot, album_wait: float):
        self.bot = bot
        self.album_wait = album_wait

    async def answer(self, claim: inbox.Claim, message: Message) -> Outcome:
        """Do what `message` asks; returns the inbox status and a note."""
        chat, user = message.chat, message.from_
        if user is None or user.is_bot:
            return "skipped", "a message with no human sender"
        group = chat.type in GROUP_TYPES
        text = message.text or message.caption or ""
        me = await self.bot.me() if group else {}
        if group:
            addressed, text = addressed_in_group(message, text, me)
            if not addressed:
                return "skipped", "a group message not addressed to the bot"
        sink = self.bot.sink(claim, chat.id, chat.type, await self.bot.placement(message))
        gate = await self.bot.db(
            admit,
            self.bot.settings,
            chat_id=chat.id,
            chat_type=chat.type,
            title=chat.title,
            user_id=user.id,
            username=user.username,
        )
        if gate in (TELL_DENIED, DENIED):
            log.info("user %s (@%s) is not allowed", user.id, user.username)
            if gate == TELL_DENIED:
                await sink.finish(DENIED_TEXT.format(user_id=user.id))
            return "done", "not allowed"
        if gate == BLOCKED:
            return "skipped", "the chat blocked the bot"
        command = parse_command(text, me.get("username"))
        if command is not None and command[0] in BY_NAME:
            return await self._command(claim, message, sink, *command)
        if message.text and not group:
            corrected = await self._correction(message)
            if corrected is not None:
                await _show(sink, corrected)
                return "done", "a correction from /why"
        return await self._content(claim, message, sink, text, me)

    async def _content(self, claim: inbox.Claim, message: Message, sink: TelegramSink, text: str, me: dict) -> Outcome:
        """What the message holds decides its way: said unreadable, heard, read, or answered."""
        content = message_content(message)
        if content in UNREAD_CONTENT:
            await sink.finish(UNREAD_CONTENT[content])
            return "done", f"unsupported {content}"
        if content in SERVICE_CONTENT:  # stored pending by an older version; new ones never get here
            return "skipped", f"{content}, {SERVICE_REASON}"
        if content not in READ_CONTENT:
            return "skipped", "a message with no content Ash knows (newer than Bot API 10.1)"
        if content in READ_RECORDINGS:
            heard = await hear(self.bot.client, self.bot.settings, message, content, sink, text)
            if isinstance(heard, str):
                return "done", heard  # answered already: why it could not be heard
            # Each recording is a turn of its own, also when sent as an album of audio files.
            message = msgspec.structs.replace(message, media_group_id=None)
            return await self._turn(claim, message, sink, heard.text, me)
        if content in READ_FILES:
            attachment = await read_attachment(self.bot.client, self.bot.runtime, message, sink)
            if isinstance(attachment, str):
                return "done", attachment  # answered already: why it could not be read
            # Each file is a turn of its own, also when sent as an album of files.
            message = msgspec.structs.replace(message, media_group_id=None)
            return await self._turn(claim, message, sink, text, me, attachment=attachment)
        return await self._turn(claim, message, sink, text, me)

    async def _command(self, claim: inbox.Claim, message: Message, sink: TelegramSink, name: str, args: str) -> Outcome:
        user, asker = message.from_, asker_of(message)
        # A command, like a new message, answers a waiting Run / Deny with "not run" (and /forget
        # must not leave a call holding the person's words, ready to run on an old button).
        await self.bot.approvals.supersede(asker.provider, asker.chat_id, asker.user_id)
        reply_to = message.reply_to_message.message_id if message.reply_to_message is not None else None

        def command_reply(conn) -> Reply:
            # A turn records who wrote (name, username) itself; a command does it here.
            store.touch_profile(conn, asker.user_id, user.username, display_name(user) or None)
            return run_command(Ask(conn, self.bot.settings, asker, args, reply_to), name)

        reply = await self.bot.db(command_reply)
        if message.chat.type in GROUP_TYPES and BY_NAME[name].private:
            return await self._answer_privately(claim, message, reply, name)
        await _show(sink, reply)
        return "done", f"command /{name}"

    async def _correction(self, message: Message) -> Reply | None:
        """After Wrong under /why, the person's next message is the right version: stored, and
        answered with what changed; None when no correction was asked for."""
        from lib.conversation.why import correction_reply

        # A forward or someone else's quoted words as the correction: stored pending review.
        outside = outside_content(message, self.bot.bot_id)
        return await self.bot.db(correction_reply, self.bot.settings, asker_of(message), message.text, outside)

    async def _turn(
        self,
        claim: inbox.Claim,
        message: Message,
        sink: TelegramSink,
        text: str,
        me: dict,
        attachment: Attachment | None = None,
    ) -> Outcome:
        """A turn of the agent: the message (an album's photos with it) streamed into `sink`."""
        if claim.answer is not None:
            return await _answered_before(claim, sink)
        messages = [message]
        if message.media_group_id:
            messages = await gather_album(self.bot.runtime.db, self.bot.bot_id, claim, message, self.album_wait)
            text = "\n".join(m.caption for m in messages if m.caption) or text
            if message.chat.type in GROUP_TYPES:
                text = addressed_in_group(message, text, me)[1]
        images = await download_photos(self.bot.client, messages, self.bot.config.photo_max_bytes)
        if not text.strip() and not images and attachment is None:
            return "skipped", "nothing to answer"
        turn = self._turn_input(claim, message, sink, text, me, images)
        if attachment is not None:
            turn = attachment.into(turn)
        # Writing again instead of answering Run / Deny means the waiting call is not run.
        await self.bot.approvals.supersede(turn.provider, turn.chat_id, turn.user_id)
        await self._follow_ups(turn)
        await sink.typing()
        try:
            result = await self.bot.runner(turn, sink)
        except asyncio.CancelledError as cancelled:
            if cancelled.args == (STOP_REQUESTED,):
                await sink.halt()  # what was written stays, marked as stopped
            raise
        if not sink.finished:
            await sink.finish(result.text or "…")
        await self._after_turn(turn, sink)
        if result.waiting_for is not None:
            await self.bot.approvals.shown(result.waiting_for, sink)
        return "done", None if result.ok else "turn reported failure"

    async def _follow_ups(self, turn: TurnInput) -> None:
        """The person wrote: read their own words for events to follow up (rules, no model call)."""
        from lib.schedule.followups import Where, on_message

        where = Where(turn.user_id, turn.chat_id, turn.chat_type, turn.message_thread_id, turn.direct_messages_topic_id)
        own = turn.text if turn.typed_text is None else turn.typed_text
        changed = await self.bot.db(on_message, self.bot.settings, where, own, self.bot.runtime.clock())
        if changed is not None:
            self.bot.runtime.signals.schedule_changed.emit()

    def _turn_input(
        self, claim: inbox.Claim, message: Message, sink: TelegramSink, text: str, me: dict, images: list
    ) -> TurnInput:
        user, bot_id = message.from_, me.get("id") or self.bot.bot_id
        return TurnInput(
            provider="telegram",
            chat_id=str(message.chat.id),
            user_id=str(user.id),
            text=with_context(message, text, bot_id),
            chat_type=message.chat.type,
            username=user.username,
            display_name=display_name(user) or None,
            images=tuple(images),
            update_id=claim.update_id,
            message_thread_id=sink.placement.message_thread_id,
            direct_messages_topic_id=sink.placement.direct_messages_topic_id,
            untrusted=outside_content(message, bot_id),
            # A forward's text is someone else's words; otherwise what the person typed or said.
            typed_text="" if message.forward_origin is not None else text,
        )

    async def _after_turn(self, turn: TurnInput, sink: TelegramSink) -> None:
        """What the answer's messages mean for the stored state once they are shown."""
        if str(sink.chat_id) != turn.chat_id:
            from lib.telegram.chat_moves import move_chat

            # The group became a supergroup while this turn ran (a 400 said so): what the turn
            # stored under the old id follows the rest of the chat.
            await self.bot.db(move_chat, turn.chat_id, sink.chat_id, time.time())
        if sink.sources_id is not None and sink.message_ids:
            from lib.memory.provenance import attach_replies

            # /why in reply to any part of this answer finds what it drew on.
            await self.bot.db(attach_replies, sink.sources_id, sink.message_ids)

    async def _answer_privately(self, claim: inbox.Claim, message: Message, reply: Reply, command: str) -> Outcome:
        """Send a command's answer to the sender's private chat and say so in the group; when
        Telegram refuses (they never started the bot, or blocked it: 403), post a link that
        starts the private chat instead. That 403 blocks nothing: the group still gets answers."""
        user, chat = message.from_, message.chat
        try:
            await _show(self.bot.sink(claim, user.id, "private", CHAT), reply)
        except Forbidden as exc:
            log.info("user %s has no private chat with the bot (%s); linking it in the group", user.id, exc.message)
            username = (await self.bot.me()).get("username")
            link = f"https://t.me/{username}?start" if username else "a private chat with me"
            notice, note = OPEN_PRIVATELY.format(link=link, command=command), f"command /{command}: no private chat"
        else:
            notice, note = SENT_PRIVATELY, f"command /{command}: answered privately"
        with contextlib.suppress(TelegramError):
            await self.bot.client.send_message(chat.id, notice, placement=await self.bot.placement(message))
        return "done", note


async def _show(sink: TelegramSink, reply: Reply) -> None:
    """A command's answer, with its buttons under it."""
    sink.reply_markup = keyboard(reply.buttons)
    await sink.finish(reply.text)


async def _answered_before(claim: inbox.Claim, sink: TelegramSink) -> Outcome:
    """An earlier run of this turn got as far as its final answer and was interrupted (killed,
    shut down, stopped for a restore): show that answer again, as it was, rather than ask the
    model anew and stream a new one over it. Its exchange was stored before it was shown."""
    answer = msgspec.json.decode(claim.answer)
    sink.reply_markup = msgspec.convert(answer["markup"], InlineKeyboardMarkup) if answer["markup"] else None
    log.info("update %s: its answer was ready before an interruption; showing it again", claim.update_id)
    await sink.finish(answer["text"])
    return "done", "answered before an interruption"
