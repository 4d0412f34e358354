"""Voice notes, audio files and video messages in: downloaded within a size cap, transcribed
(lib/senses/transcribe.py), and the transcript made the turn's text.

The person sees what was heard: a short quote above the answer, in the same message (the sink's
`heading`). A forwarded recording is someone else's words, so the turn marks it untrusted. What
cannot be heard gets a clear reply and the update is done: no download is retried for ever.
"""

from __future__ import annotations

import html
import logging
from dataclasses import dataclass

import msgspec

from lib.config import Settings
from lib.errors import BadRequest
from lib.senses.transcribe import TranscriptionFailed, Unavailable, transcriber_for
from lib.telegram.client import TelegramClient
from lib.telegram.kinds import RECORDING_NOUNS
from lib.telegram.sink import TelegramSink
from lib.telegram.types import NOT_SENT, Message

log = logging.getLogger("ash.telegram")

# What each kind is called in a reply, and the name its upload gets: the extension tells the
# transcription server the format. Telegram names voice files `.oga`, which OpenAI refuses.
UPLOAD_NAME = {"voice": "voice.ogg", "audio": "audio.mp3", "video_note": "video_note.mp4"}
# Characters of the transcript quoted above the answer: enough to check it was heard right.
HEARD_LIMIT = 200

CANNOT_LISTEN = {
    "voice": "I can't listen to voice messages yet; please type your message.",
    "audio": "I can't listen to audio yet; please type your message.",
    "video_note": "I can't watch video messages yet; please type your message.",
}
NOT_INSTALLED = "I can't listen to {noun}s here: {how}. Please type your message meanwhile."
TOO_LARGE = "That {noun} is {size}; I can transcribe files up to {limit}. Please send a shorter one, or type it."
FAILED = "Sorry, I couldn't transcribe that {noun}: {reason}. Please try again, or type your message."
SILENT = "I couldn't make out any words in that {noun}. Please try again, or type your message."


class AudioFile(msgspec.Struct, kw_only=True):
    """What Ash needs of a Voice, Audio or VideoNote (the Bot API gives all three these fields)."""

    file_id: str
    file_size: int | None = None
    file_name: str | None = None  # Audio only
    mime_type: str | None = None


_AUDIO_DECODER = msgspec.json.Decoder(AudioFile)


@dataclass(frozen=True)
class Heard:
    """A transcribed recording: the turn's text (a forwarded one is named as outside content
    with any other forward, lib/telegram/context.py outside_content)."""

    text: str


def _recording(message: Message, kind: str) -> AudioFile:
    field = getattr(message, kind)
    if isinstance(field, msgspec.Raw):  # audio and video_note are kept raw in types.py
        if field is NOT_SENT:
            raise ValueError(f"the message carries no {kind}")
        return _AUDIO_DECODER.decode(field)
    return AudioFile(file_id=field.file_id, file_size=field.file_size, mime_type=field.mime_type)


def _size(size: int) -> str:
    if size >= 1_000_000:
        return f"{size / 1_000_000:.1f} MB"
    return f"{size / 1000:.0f} kB" if size >= 1000 else f"{size} bytes"


def _upload_name(kind: str, recording: AudioFile, file_path: str | None) -> str:
    if kind == "audio":
        for name in (recording.file_name, file_path):
            if name and "." in name.rsplit("/", 1)[-1]:
                return name.rsplit("/", 1)[-1]
    return UPLOAD_NAME[kind]


def heard_line(transcript: str, limit: int = HEARD_LIMIT) -> str:
    """The quote shown above the answer (Telegram HTML): the transcript's start, cut at a word."""
    excerpt = " ".join(transcript.split())
    if len(excerpt) > limit:
        excerpt = excerpt[:limit].rsplit(" ", 1)[0].rstrip(",.;:") + "…"
    return f"<blockquote>🎤 {html.escape(excerpt, quote=False)}</blockquote>"


async def hear(
    client: TelegramClient, settings: Settings, message: Message, kind: str, sink: TelegramSink, caption: str
) -> Heard | str:
    """The recording in `message` as a turn's text (its caption after the transcript), with the
    quote of it set as the sink's heading; or, when it cannot be heard, the reply already sent and
    a note for the inbox."""
    noun = RECORDING_NOUNS[kind]
    transcriber = transcriber_for(settings)
    if isinstance(transcriber, Unavailable):
        reply = NOT_INSTALLED.format(noun=noun, how=transcriber.how) if transcriber.how else CANNOT_LISTEN[kind]
        await sink.finish(reply)
        return f"unsupported {kind}: no transcription"
    try:
        recording = _recording(message, kind)
    except (msgspec.DecodeError, ValueError) as exc:
        log.warning("a %s Ash cannot read: %s", kind, exc)
        await sink.finish(CANNOT_LISTEN[kind])
        return f"unreadable {kind}"
    limit = settings.config.transcription.max_bytes
    # The size Telegram states is checked before anything is downloaded (the Bot API serves files
    # up to 20 MB; a larger one would fail anyway, after costing the transfer).
    if recording.file_size is not None and recording.file_size > limit:
        await sink.finish(TOO_LARGE.format(noun=noun, size=_size(recording.file_size), limit=_size(limit)))
        return f"{kind} too large"
    try:
        meta = await client.get_file(recording.file_id)
        if meta.file_size is not None and meta.file_size > limit:
            await sink.finish(TOO_LARGE.format(noun=noun, size=_size(meta.file_size), limit=_size(limit)))
            return f"{kind} too large"
        audio = await client.download(meta.file_path, limit) if meta.file_path else None
    except BadRequest as exc:
        # Refused for good (file gone, or over the cap while downloading); network errors are
        # left to the inbox worker, which retries them a few times.
        log.info("could not download a %s: %s", kind, exc.message)
        audio = None
    if audio is None:
        await sink.finish(FAILED.format(noun=noun, reason="Telegram would not hand me the file"))
        return f"{kind} not downloadable"
    await sink.typing()
    try:
        transcript = await transcriber.transcribe(audio, _upload_name(kind, recording, meta.file_path))
    except TranscriptionFailed as exc:
        await sink.finish(FAILED.format(noun=noun, reason=exc))
        return f"{kind} not transcribed"
    if not transcript.strip():
        await sink.finish(SILENT.format(noun=noun))
        return f"{kind} without words"
    log.info("transcribed a %s: %d characters", kind, len(transcript))
    sink.heading = heard_line(transcript)
    text = "\n\n".join(part for part in (transcript.strip(), caption.strip()) if part)
    return Heard(text)
