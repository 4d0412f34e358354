"""Documents in: a file sent in chat, checked against `[documents] max_bytes` before anything is
downloaded, read by type (lib/senses/documents.py), and put into the turn after the caption as
framed data with its file name, at most `max_chars` of it with a note of what was cut.

A document's text is someone else's words: the turn marks it untrusted, and history keeps only a
short reference to it, while the text itself (up to `max_index_chars`) is kept in the chat's
memory (lib/memory/documents.py: the sender's own in a private chat, the group's in a group), so
a question next week finds it. An image sent as a file goes to the model's vision like a photo.
What cannot be read gets a clear reply and the update is done: nothing is retried for ever.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from dataclasses import dataclass

from lib.agent import Image, TurnInput
from lib.config import DocumentsConfig
from lib.errors import BadRequest
from lib.memory.scope import memory_owner
from lib.runtime import Runtime
from lib.senses.documents import DocumentImage, DocumentText, UnreadableDocument, clean_name, framed, read_document
from lib.telegram.client import TelegramClient
from lib.telegram.sink import TelegramSink
from lib.telegram.types import Document, Message

log = logging.getLogger("ash.telegram")

TOO_LARGE = "{name} is {size}; I read files up to {limit}. Please send a smaller file, or just the part you need."
UNREADABLE = "I couldn't read {name}: {reason}."
NOT_HANDED = "I couldn't get {name} from Telegram ({reason}). Please send it again."


@dataclass(frozen=True)
class Attachment:
    """What a document adds to its turn."""

    text: str  # the framed text the model reads after the caption ("" for an image)
    reference: str  # what history keeps in its place
    images: tuple[Image, ...] = ()
    untrusted: tuple[str, ...] = ()

    def into(self, turn: TurnInput) -> TurnInput:
        """`turn` (its text the caption) with the document added."""
        if not self.text:
            return dataclasses.replace(turn, images=turn.images + self.images)
        return dataclasses.replace(
            turn,
            text="\n\n".join(part for part in (turn.text, self.text) if part),
            stored_text="\n".join(part for part in (turn.text, self.reference) if part),
            # The person's own words are the caption only (web requests the document asks for are not theirs).
            typed_text=turn.text if turn.typed_text is None else turn.typed_text,
            images=turn.images + self.images,
            untrusted=turn.untrusted + self.untrusted,
        )


def _size(size: int) -> str:
    return f"{size / 1_000_000:.1f} MB" if size >= 100_000 else f"{max(size // 1000, 1)} KB"


def _reference(document: DocumentText, kept: int) -> str:
    pages = f", {document.pages} page{'s' if document.pages != 1 else ''}" if document.pages is not None else ""
    total = len(document.text)
    if document.cut:
        where = f"the first {kept:,} characters kept in memory"
    elif kept >= total:
        where = "kept in memory"
    else:
        where = f"the first {kept:,} of {total:,} characters kept in memory"
    return f"[document {document.name}{pages}: {where}]"


async def _download(client: TelegramClient, document: Document, name: str, limit: int) -> tuple[bytes, str] | str:
    """The file's bytes and its file_unique_id (the same file sent again has the same one), or the
    reply saying why there are none (network errors are raised: the inbox worker retries those)."""
    too_large = TOO_LARGE.format(name=name, size="{size}", limit=_size(limit))
    # The size Telegram states is checked before anything is downloaded.
    if document.file_size is not None and document.file_size > limit:
        return too_large.format(size=_size(document.file_size))
    try:
        meta = await client.get_file(document.file_id)
        if meta.file_size is not None and meta.file_size > limit:
            return too_large.format(size=_size(meta.file_size))
        if meta.file_path is None:
            return NOT_HANDED.format(name=name, reason="it gave no path to download it from")
        return await client.download(meta.file_path, limit), meta.file_unique_id
    except BadRequest as exc:
        # Refused for good: over the cap while downloading (the update stated no size), over the
        # Bot API's own 20 MB ("file is too big"), or gone.
        log.info("could not download a document: %s", exc.message)
        if "larger than" in exc.message or "too big" in exc.message:
            return too_large.format(size=f"over {_size(limit)}")
        return NOT_HANDED.format(name=name, reason=exc.message)


async def _read(
    data: bytes, document: Document, name: str, config: DocumentsConfig
) -> DocumentText | DocumentImage | str:
    try:
        # A PDF is read in a parser process killed after read_timeout (lib/senses/parsing.py):
        # no thread is held while it runs, so a slow file delays no one else's turn.
        return await read_document(
            data,
            name=name,
            mime_type=document.mime_type,
            max_pages=config.max_pages,
            max_chars=max(config.max_chars, config.max_index_chars),
            timeout=config.read_timeout,
        )
    except UnreadableDocument as exc:
        return UNREADABLE.format(name=name, reason=exc)
    except Exception:  # a stranger's bytes are exactly where a parser meets what it never saw
        log.exception("reading a document failed")
        return UNREADABLE.format(name=name, reason="it made my reader fail; it may be damaged")


async def read_attachment(
    client: TelegramClient, runtime: Runtime, message: Message, sink: TelegramSink
) -> Attachment | str:
    """The document in `message` for its turn, its text kept in the chat's memory; or, when it
    cannot be read, the reply already sent and a note for the inbox."""
    config = runtime.settings.config.documents
    document = message.document
    name = clean_name(document.file_name)
    downloaded = await _download(client, document, name, config.max_bytes)
    if isinstance(downloaded, str):
        await sink.finish(downloaded)
        return "document not downloaded"
    data, file_unique_id = downloaded
    await sink.typing()
    read = await _read(data, document, name, config)
    if isinstance(read, str):
        await sink.finish(read)
        return "document not readable"
    if isinstance(read, DocumentImage):
        return Attachment("", "", images=(Image(read.data, read.media_type),))
    chat, user = message.chat, message.from_
    # The memory index (and numpy under it) loads with the first file, not at start-up.
    from lib.memory.documents import content_sha256, keep_document

    await asyncio.to_thread(
        lambda: keep_document(
            runtime.db.conn(),
            runtime.settings,
            owner=memory_owner(chat.type, str(chat.id), str(user.id)),
            name=name,
            parts=[(section.label, section.text) for section in read.sections],
            sha256=content_sha256(data),
            file_unique_id=file_unique_id,
            sent_by=str(user.id),
            pages=read.pages,
            max_chars=config.max_index_chars,
            # The server's memory service embeds the sections just after the turn, as it does the
            # turn's own messages: the answer does not wait for them.
            embed=False,
        )
    )
    kept = min(len(read.text), config.max_index_chars)
    log.info("read document %s: %d characters, %d kept in memory", name, len(read.text), kept)
    return Attachment(
        framed(read, config.max_chars, kept_chars=kept),
        _reference(read, kept),
        untrusted=(f"document {name}",),
    )
