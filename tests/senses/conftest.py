"""Fixtures for the voice tests: recorded voice updates, a fake Bot API that serves the recording,
and a bot configured to answer the docs example's sender through the real agent turn."""

from __future__ import annotations

import copy
import io
import itertools
import wave

import httpx
import numpy as np
import pytest
import respx

from tests.support.agent import set_keys, write_config
from tests.support.telegram import API, TOKEN, FakeBotAPI, load, make_runtime

# The sender (and private chat) of the Bot API docs' voice example.
VOICE_USER = 1111111
BASE_SETTINGS = f'owner = {VOICE_USER}\n[embeddings]\nprovider = "none"\n'
FORWARD_ORIGIN = load("message_forward_origin_chat_anonymous_admin.json")["forward_origin"]


def voice_update(
    update_id: int,
    *,
    kind: str = "voice",
    file_size: int | None = 23000,
    caption: str | None = None,
    forwarded: bool = False,
) -> dict:
    """The docs' voice example (update_voice_docs_example.json) brought up to today's Bot API: the
    sender's `is_bot` and the file's `file_unique_id`, which the outdated example lacks. `kind`
    "audio" or "video_note" swaps the voice for that object, with the fields the Bot API defines
    for it (an Audio's file_name and mime_type, a VideoNote's length)."""
    update = copy.deepcopy(load("update_voice_docs_example.json"))
    update["update_id"] = update_id
    message = update["message"]
    message["message_id"] = update_id
    message["from"]["is_bot"] = False
    recording = message.pop("voice")
    recording["file_unique_id"] = "AgADbXXXXXXXXXXX"
    if file_size is None:
        del recording["file_size"]
    else:
        recording["file_size"] = file_size
    if kind == "audio":
        recording.update(mime_type="audio/mp4", file_name="memo.m4a", title="Memo")
    elif kind == "video_note":
        del recording["mime_type"]
        recording["length"] = 240
    message[kind] = recording
    if caption is not None:
        message["caption"] = caption
    if forwarded:
        message["forward_origin"] = FORWARD_ORIGIN
    return update


class Recordings:
    """Serves one recording through getFile and the file download, as Telegram does."""

    def __init__(self, router: respx.MockRouter, bot: FakeBotAPI):
        self.router = router
        self.bot = bot

    def serve(self, data: bytes, file_path: str = "voice/file_2.oga") -> None:
        """getFile answers with `file_path` (getFile_ok.json, its photo path swapped for a voice
        path) and the download returns `data`."""
        answer = copy.deepcopy(load("getFile_ok.json"))
        answer["result"].update(file_path=file_path, file_size=len(data))
        self.bot.fail["getFile"] = [(200, answer)]  # queued answers come before the default one
        # Same pattern as FakeBotAPI's download route: respx replaces it.
        self.router.route(method="GET", url__startswith=f"{API}/file/bot{TOKEN}/").mock(
            return_value=httpx.Response(200, content=data)
        )

    def downloads(self) -> list[str]:
        """Paths of the files the bot downloaded."""
        return [call.request.url.path for call in self.router.calls if "/file/bot" in call.request.url.path]


@pytest.fixture
def voice_bot():
    """The fake Bot API (tests/support/telegram.py) and a way to serve a recording through it."""
    with respx.mock(assert_all_called=False) as router:
        bot = FakeBotAPI(router)
        yield bot, Recordings(router, bot)


def configure(home, monkeypatch, transcription: str = "", *, openai_key: bool = True) -> None:
    """A bot whose owner sent the voice example; both model SDKs point at their stubs."""
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", TOKEN)
    monkeypatch.setenv("TELEGRAM_API_BASE", API)
    write_config(home, BASE_SETTINGS + (f"[transcription]\n{transcription}\n" if transcription else ""))
    set_keys(monkeypatch, openai=openai_key)


@pytest.fixture
async def voice_runtime(db_path, ash_home, monkeypatch):
    configure(ash_home, monkeypatch)
    async with httpx.AsyncClient() as http:
        yield make_runtime(http)


def ogg_opus(wav: bytes) -> bytes:
    """`wav` encoded as Telegram sends a voice note: Opus in an OGG container, 48 kHz, mono (PyAV)."""
    import av

    source = av.open(io.BytesIO(wav))
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="ogg") as out:
        stream = out.add_stream("libopus", rate=48000, layout="mono")
        resampler = av.AudioResampler(format="s16", layout="mono", rate=48000)
        for frame in itertools.chain(source.decode(audio=0), [None]):
            for piece in resampler.resample(frame):
                out.mux(stream.encode(piece))
        out.mux(stream.encode(None))
    source.close()
    return buffer.getvalue()


def tone_wav(seconds: float = 0.5, rate: int = 16000) -> bytes:
    """A 440 Hz tone as a WAV file (a sound with no words in it)."""
    samples = (np.sin(2 * np.pi * 440 * np.arange(int(seconds * rate)) / rate) * 8000).astype("<i2")
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(samples.tobytes())
    return buffer.getvalue()
