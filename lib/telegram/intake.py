"""What the webhook does with an update's body: validate it as Telegram's, store it in the inbox."""

from __future__ import annotations

import asyncio
import logging

import msgspec

from lib.errors import Rejected
from lib.inbox import queue as inbox
from lib.inbox.group_commit import InboxWriter
from lib.runtime import Runtime
from lib.telegram.kinds import skip_reason, update_chat_id, update_kind
from lib.telegram.types import UPDATE_DECODER, UPDATE_ID_DECODER

log = logging.getLogger("ash.webhook")

# SQLite integers are signed 64-bit; a larger update_id cannot be a real one. Telegram's start
# from a positive number and count up; negative ones are Ash's own (lib/inbox/queue.py
# enqueue_own), so an update claiming one is refused rather than stored in their place.
MAX_UPDATE_ID = 2**63 - 1


def parse(body: bytes) -> tuple[int, str | None, str, str | None]:
    """(update_id, chat key, kind, why it is not answered) of a body; Rejected(400) without an
    integer update_id.

    One full decode in the common case; only a body that does not decode as an Update is looked
    at again for its update_id alone (stored as "unknown" if it has one, else refused)."""
    try:
        update = UPDATE_DECODER.decode(body)
    except UnicodeDecodeError:
        # msgspec raises this (not DecodeError) for invalid UTF-8 inside a string; JSON is UTF-8.
        raise Rejected(400, "body is not valid UTF-8") from None
    except (msgspec.DecodeError, RecursionError):
        # msgspec raises RecursionError, not DecodeError, on JSON nested about 1,000 deep.
        update = None
    why = None
    if update is not None:
        update_id = update.update_id
        chat = update_chat_id(update)
        chat_key, kind = None if chat is None else str(chat), update_kind(update)
        if kind in inbox.UNANSWERED_KINDS:  # the rare path: a kind Ash never answers
            why = skip_reason(update, kind)
    else:
        try:
            update_id = UPDATE_ID_DECODER.decode(body).update_id
        except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
            raise Rejected(400, "body is not a JSON object with an integer update_id") from None
        # Stored anyway (Telegram must not retry it forever), already skipped: see inbox.UNANSWERED_KINDS.
        chat_key, kind = None, "unknown"
    if not 0 <= update_id <= MAX_UPDATE_ID:
        raise Rejected(400, "update_id out of range (Telegram's are whole numbers from 0 up)")
    return update_id, chat_key, kind, why


def _outcome(update_id: int, kind: str, why: str | None, fresh: bool) -> bool:
    if not fresh:
        log.info("update %s delivered again: already stored", update_id)
        return False
    if kind == "unknown":
        why = why or "it does not decode as a Telegram update"
        log.warning("update %s stored but not answered: %s", update_id, why)
    elif why is not None:
        log.info("skipping update %s: %s (%s)", update_id, kind, why)
    return kind not in inbox.UNANSWERED_KINDS


def store_update(runtime: Runtime, body: bytes) -> bool:
    """Validate and store one update; True when it waits for the inbox worker (new and answerable).
    Runs in a worker thread."""
    update_id, chat_key, kind, why = parse(body)
    fresh = inbox.store(runtime.db.conn(), runtime.settings.bot_id, update_id, chat_key, kind, body)
    return _outcome(update_id, kind, why, fresh)


async def accept(runtime: Runtime, writer: InboxWriter | None, body: bytes) -> bool:
    """Validate and store one update, committed before this returns; True when it waits for the
    inbox worker (False for a repeat delivery or a kind Ash does not answer, stored as skipped).

    Validation is a few microseconds of msgspec on the event loop; the write goes to the
    group-committing InboxWriter when the server runs one (else a worker thread)."""
    if writer is None:
        return await asyncio.to_thread(store_update, runtime, body)
    update_id, chat_key, kind, why = parse(body)
    return _outcome(update_id, kind, why, await writer.store(update_id, chat_key, kind, body))
