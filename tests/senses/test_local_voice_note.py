"""A real voice note, heard on this machine with the network cut: spoken by Debian's espeak-ng,
encoded as Telegram sends voice notes (OGG Opus, 48 kHz, mono), served by the fake Bot API, and
transcribed by faster-whisper on the bundled Whisper base model (`[transcription] provider =
"local"`); its words reach the model's request and the quote above the answer."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import time

import httpx
import pytest

from lib.agent import run_turn
from lib.senses import whisper_local
from lib.senses.transcribe import transcriber_for
from lib.telegram.updates import telegram_worker
from tests.senses.conftest import VOICE_USER, configure, ogg_opus, voice_update
from tests.support.agent import ANTHROPIC_MESSAGES, request_json, sse_response
from tests.support.database import query
from tests.support.telegram import deliver, make_runtime

pytestmark = pytest.mark.slow

SPOKEN = "Please remember that the blue notebook is in the kitchen drawer"


def needs(what: str, missing: bool) -> None:
    """Skip without a tool this test needs, except under CI, which promises it (.ci/debian.sh)."""
    if not missing:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {what} is missing", pytrace=False)
    pytest.skip(f"{what} is missing")


@pytest.fixture
def offline(monkeypatch):
    """No connection leaves the machine: only loopback and unix sockets may connect."""
    real_connect = socket.socket.connect

    def connect(sock, address):
        host = address[0] if isinstance(address, tuple) else None
        if host is not None and host not in ("127.0.0.1", "::1", "localhost"):
            raise OSError(f"network cut by the test: connect to {address}")
        return real_connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(OSError, match="network cut"):
        socket.create_connection(("1.1.1.1", 443), timeout=1)


def spoken_voice_note(tmp_path) -> bytes:
    wav = tmp_path / "spoken.wav"
    subprocess.run(["espeak-ng", "-w", str(wav), SPOKEN], check=True, capture_output=True, timeout=30)
    return ogg_opus(wav.read_bytes())


async def test_a_spoken_voice_note_is_transcribed_offline_and_its_words_reach_the_model(
    db_path, ash_home, monkeypatch, voice_bot, httpx2_mock, offline, tmp_path, sleeps, caplog
):
    caplog.set_level("INFO", logger="ash.senses")
    needs("espeak-ng (apt-get install espeak-ng)", shutil.which("espeak-ng") is None)
    needs("the local-transcription extra", bool(whisper_local.missing_packages()))
    configure(ash_home, monkeypatch, 'provider = "local"\nidle_unload = 1')
    bot, recordings = voice_bot
    voice = spoken_voice_note(tmp_path)
    assert voice.startswith(b"OggS")
    recordings.serve(voice, "voice/file_3.oga")
    model = httpx2_mock.post(ANTHROPIC_MESSAGES).mock(return_value=sse_response("anthropic", "stream_text.sse"))

    async with httpx.AsyncClient() as http:
        runtime = make_runtime(http)

        async def agent(turn, sink):
            return await run_turn(runtime, turn, sink)

        deliver(runtime, voice_update(3001, file_size=len(voice)))
        await telegram_worker(runtime, runner=agent).drain()
        whisper = transcriber_for(runtime.settings).whisper

    asked = request_json(model.calls.last)["messages"][-1]["content"]
    asked = asked if isinstance(asked, str) else " ".join(block.get("text", "") for block in asked)
    words = asked.lower()
    assert "notebook" in words and "kitchen" in words, asked
    [reply] = bot.sent_to(VOICE_USER)
    assert reply["text"].startswith("<blockquote>🎤 ") and "notebook" in reply["text"].lower()
    assert [r["content"] for r in query(db_path, "SELECT content FROM messages WHERE role = 'user'")] == [asked]
    # The model was joined under the Ash home, its hash checked, beside its small files.
    cache = ash_home / "models" / "whisper-base"
    assert sorted(p.name for p in cache.iterdir()) == ["config.json", "model.bin", "tokenizer.json", "vocabulary.txt"]
    # And it leaves memory once idle_unload (1 s here) has passed without another voice note.
    released = "released the local Whisper model after 1 s without use"
    deadline = time.monotonic() + 10
    while released not in caplog.text and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert released in caplog.text and not whisper.loaded
    assert "loaded the local Whisper model" in caplog.text
