"""Consolidation's daily review message in Telegram (lib/memory/daily.py announces it).

Queued into the inbox as work of Ash's own (kind `memory_review`) for the reviewer's private
chat, never inside their `[followups] quiet_hours` (an announcement made at the quiet hour waits
for their end), in the same transaction that takes the announcement: queued once. The inbox
worker then sends it like any answer, through a sink that records it under the claim, so a
worker killed mid-send shows it again rather than twice. What it lists is read when it is sent:
proposals decided in the meantime are left out, and with none left nothing is sent.

Its inbox id is the negative of OWN_IDS plus the newest proposal it announces: far above any
schedule run's id (the other work Ash queues, lib/inbox/queue.py enqueue_own), so the two never
meet, and the same proposals are never announced twice.
"""

from __future__ import annotations

import logging

import apsw
import msgspec

from lib.config import Settings
from lib.conversation import access, pending
from lib.db import immediate, one
from lib.inbox import queue as inbox
from lib.memory import daily
from lib.schedule import followups
from lib.schedule.store import zone_for
from lib.telegram import chats
from lib.telegram.keyboards import keyboard
from lib.telegram.kinds import REVIEW
from lib.telegram.placement import CHAT

log = logging.getLogger("ash.telegram")

QUEUED_SQL = "SELECT 1 FROM inbox WHERE bot_id = ? AND update_id = ?"
OWN_IDS = 1 << 40


class Payload(msgspec.Struct, frozen=True):
    user_id: str


def queue_reviews(conn: apsw.Connection, settings: Settings, bot_id: int, now: float) -> list[str]:
    """Queue a review message for each announcement waiting whose reviewer is outside their
    quiet hours; returns whom for."""
    window = followups.quiet_window(settings)
    queued = []
    for user_id, newest in daily.announcements(conn).items():
        if user_id.isdigit() and followups.in_quiet(now, zone_for(conn, settings, user_id), window):
            continue
        own_id = OWN_IDS + newest
        with immediate(conn):
            if user_id.isdigit() and one(conn, QUEUED_SQL, (bot_id, -own_id)) is None:
                payload = msgspec.json.encode(Payload(user_id))
                inbox.enqueue_own(conn, bot_id, own_id, user_id, REVIEW, payload)
                queued.append(user_id)
            daily.announced(conn, user_id)
    return queued


async def send(bot, claim: inbox.Claim) -> tuple[str, str | None]:
    """Send the review message a claim carries; returns the inbox status and a note."""
    try:
        user_id = msgspec.json.decode(claim.payload, type=Payload).user_id
    except msgspec.DecodeError:
        return "skipped", "a review message that does not decode"
    state = await bot.db(chats.chat_state, user_id)
    if state and state["blocked_at"]:
        return "skipped", "memory review: the chat blocked the bot"
    if not await bot.db(access.is_allowed, bot.settings, int(user_id), None):
        return "skipped", "memory review: the reviewer may no longer talk to Ash"
    reply = await bot.db(pending.review_message, bot.settings, user_id)
    if reply is None:
        return "skipped", "memory review: every proposal was decided before it was sent"
    sink = bot.sink(claim, int(user_id), "private", CHAT)
    sink.reply_markup = keyboard(reply.buttons)
    await sink.finish(reply.text)
    return "done", f"memory review for {user_id}"
