"""Memory and time of offline transcription: the process's RSS before the local Whisper model is
loaded, while it is loaded, and after `idle_unload` released it.

    .venv/bin/python bench/whisper_memory.py [--no-trim] [--seconds-of-speech N]

A voice note spoken by espeak-ng (Debian's `espeak-ng`), encoded as Telegram sends it (OGG Opus),
is transcribed twice by lib/senses/whisper_local.py on the bundled Whisper base model (joined and
hash-checked into a temporary folder first). `--no-trim` skips the malloc_trim after the release,
to show what it is for.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from lib.senses import whisper_local  # noqa: E402
from tests.senses.conftest import ogg_opus  # noqa: E402

SENTENCE = "Please remember that the blue notebook is in the kitchen drawer."


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def spoken(folder: Path, repeat: int) -> bytes:
    wav = folder / "spoken.wav"
    subprocess.run(["espeak-ng", "-w", str(wav), " ".join([SENTENCE] * repeat)], check=True, capture_output=True)
    return ogg_opus(wav.read_bytes())


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--no-trim", action="store_true", help="do not hand freed memory back to the system")
    parser.add_argument("--repeat", type=int, default=2, help="times the sentence is spoken (about 3 s each)")
    args = parser.parse_args()
    if args.no_trim:
        whisper_local._return_freed_memory = lambda: None
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        voice = spoken(folder, args.repeat)
        seconds = len(whisper_local.decode_audio(voice)) / whisper_local.SAMPLE_RATE
        before = rss_mb()
        whisper = whisper_local.LocalWhisper(
            lambda: whisper_local.prepare_model(whisper_local.bundled_source(), folder / "model"), idle_unload=1.0
        )
        started = time.monotonic()
        text = await whisper.transcribe(voice, "voice.ogg")
        first = time.monotonic() - started
        loaded = rss_mb()
        started = time.monotonic()
        await whisper.transcribe(voice, "voice.ogg")
        second = time.monotonic() - started
        peak = rss_mb()
        while whisper.loaded:
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.5)
        released = rss_mb()
    print(f"voice note: {seconds:.1f} s, {len(voice) / 1000:.0f} kB OGG Opus; heard: {text!r}")
    print(f"first transcription (join + hash + load + transcribe): {first:.2f} s; second: {second:.2f} s")
    print(f"RSS before: {before:.0f} MB; loaded: {max(loaded, peak):.0f} MB; released: {released:.0f} MB")


if __name__ == "__main__":
    asyncio.run(main())
