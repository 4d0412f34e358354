"""Photos in: an album's photos gathered into one turn, and each photo downloaded within a size cap."""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import datetime

import msgspec

from lib.agent import Image
from lib.db import Database
from lib.errors import TelegramError
from lib.inbox import queue as inbox
from lib.inbox.worker import Released
from lib.telegram.client import TelegramClient
from lib.telegram.types import UPDATE_DECODER, Message

log = logging.getLogger("ash.telegram")

# Seconds an album's first photo waits for its siblings (Telegram sends them as separate updates).
ALBUM_WAIT = 1.5


def _received(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


async def gather_album(
    db: Database, bot_id: int, claim: inbox.Claim, message: Message, album_wait: float = ALBUM_WAIT
) -> list[Message]:
    """This photo and its album siblings; raises Released while more may still arrive.

    The first photo's update answers for the album: it takes its siblings' pending updates
    (they are then done, with a note) once no new sibling arrived for `album_wait` seconds."""
    rows = await asyncio.to_thread(lambda: inbox.album_siblings(db.conn(), bot_id, claim.chat_key, claim.update_id))
    siblings = []
    newest = _received(claim.received_at)
    for row in rows:
        try:
            sibling = UPDATE_DECODER.decode(row["payload"]).message
        except (msgspec.DecodeError, RecursionError):
            continue
        if sibling is not None and sibling.media_group_id == message.media_group_id:
            siblings.append((row["update_id"], sibling))
            newest = max(newest, _received(row["received_at"]))
    wait = newest + album_wait - time.time()
    if wait > 0:
        raise Released(wait)
    taken = [message]
    note = f"part of album answered with update {claim.update_id}"
    for update_id, sibling in siblings:
        if await asyncio.to_thread(lambda u=update_id: inbox.take_pending(db.conn(), bot_id, u, note)):
            taken.append(sibling)
    return taken


async def download_photos(client: TelegramClient, messages: list[Message], limit: int) -> list[Image]:
    """Each message's largest photo within `limit` bytes (telegram.photo_max_bytes), downloaded."""
    images = []
    for message in messages:
        sizes = [p for p in message.photo if p.file_size is None or p.file_size <= limit]
        if not sizes:
            continue
        best = max(sizes, key=lambda p: (p.width * p.height, p.file_size or 0))
        try:
            meta = await client.get_file(best.file_id)
            if meta.file_path is None or (meta.file_size or 0) > limit:
                continue
            images.append(Image(await client.download(meta.file_path, limit), "image/jpeg"))
        except TelegramError as exc:
            log.warning("could not download a photo: %s", exc)
    return images
