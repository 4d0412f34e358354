"""Speech to text for voice notes, audio files and video messages (`[transcription]` in the config).

`openai`: any OpenAI-compatible /v1/audio/transcriptions endpoint through the openai SDK (OpenAI
itself with OPENAI_API_KEY, or a self-hosted Whisper server named by `base_url`, which needs no
key). `local`: faster-whisper on this machine (lib/senses/whisper_local.py). `none`: Ash says it
cannot listen. A client: it turns audio into text and knows nothing of Telegram or memory.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

from lib.config import Settings

log = logging.getLogger("ash.senses")

OPENAI_MODEL = "whisper-1"
LOCAL_MODEL = "base"  # the one model the local-transcription extra installs
# Seconds for one transcription request: a 20 MB file is long audio, and the server transcribes
# all of it before it answers.
TIMEOUT = 120.0
# A self-hosted server ignores the key, but the SDK refuses to start without one.
PLACEHOLDER_KEY = "not-needed"


class Transcriber(Protocol):
    async def transcribe(self, audio: bytes, filename: str) -> str:
        """The words spoken in `audio`; `filename`'s extension names its format."""


class TranscriptionFailed(Exception):
    """Audio could not be turned into text; the message says why, in words for the person."""


@dataclass(frozen=True)
class Unavailable:
    """Transcription is switched off or cannot work here. `how` is what would switch it on, for
    the person ("" when it is off by choice or has no key: the usual "I can't listen" reply)."""

    how: str = ""


class OpenAITranscriber:
    """One request per audio file to an OpenAI-compatible endpoint; no retries (the SDK's are off)."""

    def __init__(self, api_key: str | None, base_url: str | None, model: str, timeout: float = TIMEOUT):
        self.model = model
        # base_url is an origin, like OPENAI_BASE_URL (lib/config/environment.py drops a trailing /v1).
        self._base_url = f"{base_url.rstrip('/').removesuffix('/v1')}/v1" if base_url else None
        self._api_key = api_key or PLACEHOLDER_KEY
        self._timeout = timeout

    async def transcribe(self, audio: bytes, filename: str) -> str:
        """The transcript the server returns (response_format json: {"text": ...})."""
        import openai

        client = openai.AsyncOpenAI(
            api_key=self._api_key, base_url=self._base_url, max_retries=0, timeout=self._timeout
        )
        try:
            async with client:
                result = await client.audio.transcriptions.create(
                    model=self.model, file=(filename, audio), response_format="json"
                )
        except openai.APIStatusError as exc:
            log.warning("transcription with %s failed: HTTP %s %s", self.model, exc.status_code, _detail(exc))
            raise TranscriptionFailed(_status_reason(exc.status_code)) from exc
        except openai.APITimeoutError as exc:
            log.warning("transcription with %s timed out after %.0f s", self.model, self._timeout)
            raise TranscriptionFailed("the transcription service took too long to answer") from exc
        except openai.APIConnectionError as exc:
            log.warning("transcription with %s: cannot reach the server (%s)", self.model, exc.__cause__ or exc)
            raise TranscriptionFailed("the transcription service could not be reached") from exc
        return (result.text or "").strip()


class LocalTranscriber:
    """faster-whisper on this machine, its failures in words for the person."""

    def __init__(self, whisper):
        self.whisper = whisper  # the process's shared LocalWhisper (lib/senses/whisper_local.py)

    async def transcribe(self, audio: bytes, filename: str) -> str:
        """The words spoken in `audio`."""
        from lib.senses.whisper_local import ModelUnavailable, UnreadableAudio

        try:
            return await self.whisper.transcribe(audio, filename)
        except UnreadableAudio as exc:
            raise TranscriptionFailed(str(exc)) from exc
        except ModelUnavailable as exc:
            log.error("the local Whisper model cannot be used: %s", exc)
            raise TranscriptionFailed(f"the offline speech model cannot be used ({exc})") from exc
        except Exception as exc:  # CTranslate2 and PyAV raise many kinds; one voice note is not the server
            log.exception("local transcription failed")
            raise TranscriptionFailed("the offline speech model failed on this audio") from exc


def _detail(exc) -> str:
    # The server's own error message (never the request, which carries the key in a header).
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error", body)
    return str(error.get("message", "") if isinstance(error, dict) else error)[:300]


def _status_reason(status: int) -> str:
    if status in (401, 403):
        return "the transcription service refused the key"
    if status == 400:
        return "the transcription service could not read this audio"
    if status == 413:
        return "the file is too large for the transcription service"
    if status == 429:
        return "the transcription service is busy or out of quota; try again later"
    return f"the transcription service answered with an error ({status})"


def transcriber_for(settings: Settings) -> Transcriber | Unavailable:
    """The configured transcriber, or why there is none."""
    config = settings.config.transcription
    secrets = settings.secrets
    if config.provider == "none":
        return Unavailable()
    if config.provider == "openai":
        base_url = config.base_url or secrets.openai_base_url
        if not (secrets.openai_api_key or base_url):
            return Unavailable()
        return OpenAITranscriber(secrets.openai_api_key, base_url, config.model or OPENAI_MODEL)
    from lib.senses import whisper_local

    missing = whisper_local.missing_packages()
    if missing:
        return Unavailable(f"offline transcription is not installed on this server: {whisper_local.INSTALL_HINT}")
    model = config.model or LOCAL_MODEL
    if model != LOCAL_MODEL:
        # faster-whisper would download any other model by name; this server stays offline.
        return Unavailable(f"[transcription] model = {model!r}: offline transcription has only {LOCAL_MODEL!r}")
    return LocalTranscriber(whisper_local.shared_whisper(settings.home / "models" / "whisper-base", config.idle_unload))
