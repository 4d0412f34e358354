"""Documents sent in Telegram, through the real Telegram handler (lib/telegram/updates.py) against the fake
Bot API, with real agent turns whose model is stubbed at the network edge (httpx2_mock) and a real
SQLite file: the recorded document update (the Bot API docs' example) carrying a PDF made in the
test, read into the turn, answered, and recalled a week later in a fresh conversation."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta

import httpx
import pytest
import respx

from lib.agent import run_turn
from lib.db import iso, now_iso, rows
from lib.telegram.updates import telegram_worker
from tests.support.agent import ANTHROPIC_MESSAGES, request_json, set_keys, sse_response, write_config
from tests.support.database import inbox_statuses
from tests.support.documents import BOT_NAME, Files, document_update, in_group
from tests.support.pdf import damaged, encrypted, pdf_with_pages
from tests.support.telegram import (
    API,
    GROUP,
    TOKEN,
    FakeBotAPI,
    deliver,
    echo_runner,
    make_runtime,
    private_text,
)

pytestmark = pytest.mark.usefixtures("sleeps")

USER = 1111111  # the sender of the docs' example
OTHER = 2002
CONFIG = (
    f"owner = {USER}\n[telegram]\nallowed_users = [{OTHER}]\n"
    '[embeddings]\nprovider = "none"\n[memory]\nextraction_enabled = false\n'
)
REPORT = [
    ["Lighthouse restoration report", "Prepared for the harbour board."],
    ["The lantern room needs new glazing (twelve panes)."],
    ["Budget: the restoration costs 4,200 euros in total."],
]


def _text(update_id: int, text: str) -> dict:
    return private_text(update_id, text, user_id=USER, username="Testusername")


@pytest.fixture
def telegram():
    with respx.mock(assert_all_called=False) as router:
        files = Files(router)  # routes added first win over the fake Bot API's catch-all
        yield FakeBotAPI(router), files


@pytest.fixture
async def runtime(db_path, ash_home, monkeypatch):
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", TOKEN)
    monkeypatch.setenv("TELEGRAM_API_BASE", API)
    write_config(ash_home, CONFIG)
    set_keys(monkeypatch)
    async with httpx.AsyncClient() as http:
        runtime = make_runtime(http)
        yield runtime
        runtime.db.close()


class Clock:
    """The time memory stamps what it keeps. lib/db.py `now_iso` is imported by name, so the
    memory and agent modules' copies are replaced; None is the real time."""

    def __init__(self) -> None:
        self.at: datetime | None = None

    def __call__(self) -> str:
        return iso(self.at.timestamp()) if self.at else iso(datetime.now(UTC).timestamp())


@pytest.fixture
def clock(monkeypatch) -> Clock:
    # The modules whose stamps the test moves: loaded now, since the inbox worker loads some of them
    # only with the first file (the memory index stays out of start-up).
    import lib.memory.documents  # noqa: F401

    fake = Clock()
    for name, module in list(sys.modules.items()):
        if name.startswith(("lib.memory", "lib.agent")) and getattr(module, "now_iso", None) is now_iso:
            monkeypatch.setattr(module, "now_iso", fake)
    return fake


def real_turns(runtime):
    async def runner(turn, sink):
        return await run_turn(runtime, turn, sink)

    return runner


def model_sees(call) -> str:
    sent = request_json(call)
    texts = [sent["system"]]
    for message in sent["messages"]:
        texts += [block.get("text") or block["type"] for block in message["content"]]
    return "\n".join(texts)


async def test_a_pdf_is_answered_about_and_recalled_a_week_later(runtime, telegram, clock, httpx2_mock):
    bot, files = telegram
    model = httpx2_mock.post(ANTHROPIC_MESSAGES).mock(
        side_effect=lambda _: sse_response("anthropic", "stream_text.sse")
    )
    pdf = pdf_with_pages(REPORT)
    files.serve("doc-10", pdf)
    clock.at = datetime.now(UTC) - timedelta(days=7)
    sent_on = clock.at.date().isoformat()
    worker = telegram_worker(runtime, runner=real_turns(runtime))

    deliver(runtime, document_update(10, name="report.pdf", mime="application/pdf", size=len(pdf), caption="Summarise"))
    await worker.drain()

    first = model_sees(model.calls[0])
    assert 'Summarise\n\n<document name="report.pdf" pages="3">\nLighthouse restoration report' in first
    assert "twelve panes" in first and "4,200 euros" in first
    assert [m["text"] for m in bot.sent_to(USER)] == ["Hello there!"]
    conn = runtime.db.conn()
    kept = rows(conn, "SELECT content FROM messages WHERE role = 'user'")
    assert kept == [{"content": "Summarise\n[document report.pdf, 3 pages: kept in memory]"}]

    clock.at = None  # a week later, in a fresh conversation
    deliver(runtime, _text(11, "/new"), _text(12, "How much does the lighthouse restoration cost?"))
    await worker.drain()

    later = request_json(model.calls[-1])
    assert len(model.calls) == 2
    assert (
        f'<item source="document" file="report.pdf" date="{sent_on}">[report.pdf, page 3] Budget: the restoration '
        "costs 4,200 euros in total.</item>"
    ) in later["system"]
    assert [m["content"][0]["text"] for m in later["messages"]] == ["How much does the lighthouse restoration cost?"]
    assert set(inbox_statuses(runtime.settings.database_path).values()) == {"done"}


async def test_an_oversized_file_is_refused_without_downloading_it(runtime, telegram):
    bot, files = telegram
    turns = []
    deliver(runtime, document_update(20, name="scan.pdf", mime="application/pdf", size=25_000_000))

    await telegram_worker(runtime, runner=echo_runner(turns)).drain()

    assert [m["text"] for m in bot.sent_to(USER)] == [
        "scan.pdf is 25.0 MB; I read files up to 10.0 MB. Please send a smaller file, or just the part you need."
    ]
    assert files.asked == [] and "getFile" not in bot.methods()
    assert turns == []
    assert inbox_statuses(runtime.settings.database_path) == {20: "done"}


@pytest.mark.parametrize(
    ("data", "reply"),
    [
        (
            encrypted(pdf_with_pages(REPORT), "s3cret"),
            "I couldn't read report.pdf: it is protected by a password; send a copy without one.",
        ),
        (
            damaged(pdf_with_pages(REPORT)),
            "I couldn't read report.pdf: it is not a PDF I can read (the file looks damaged).",
        ),
    ],
    ids=["encrypted", "damaged"],
)
async def test_an_unreadable_pdf_gets_a_clear_reply_and_is_not_retried(runtime, telegram, data, reply):
    bot, files = telegram
    files.serve("doc-30", data)
    turns = []
    deliver(runtime, document_update(30, name="report.pdf", mime="application/pdf", size=len(data)))

    await telegram_worker(runtime, runner=echo_runner(turns)).drain()

    assert [m["text"] for m in bot.sent_to(USER)] == [reply]
    assert turns == []
    assert rows(runtime.db.conn(), "SELECT attempts, status FROM inbox") == [{"attempts": 1, "status": "done"}]
    assert rows(runtime.db.conn(), "SELECT 1 FROM memories") == []


@pytest.mark.parametrize(
    ("name", "mime", "data", "seen"),
    [
        ("people.csv", "text/csv", b"name,city\nAda,Lyon\nGrace,Arlington\n", "Ada,Lyon\nGrace,Arlington"),
        ("area.py", "text/x-python", b"def area(r):\n    return 3.14 * r * r\n", "    return 3.14 * r * r"),
    ],
)
async def test_csv_and_source_files_are_read_into_the_turn(runtime, telegram, name, mime, data, seen):
    _, files = telegram
    files.serve("doc-40", data)
    turns = []
    deliver(runtime, document_update(40, name=name, mime=mime, size=len(data), caption="What is this?"))

    await telegram_worker(runtime, runner=echo_runner(turns)).drain()

    (turn,) = turns
    assert turn.text.startswith(f'What is this?\n\n<document name="{name}">\n')
    assert seen in turn.text
    assert turn.untrusted == (f"document {name}",)
    assert turn.typed_text == "What is this?"
    assert turn.stored_text == f"What is this?\n[document {name}: kept in memory]"


async def test_an_image_sent_as_a_file_reaches_the_model_as_an_image(runtime, telegram, httpx2_mock):
    bot, files = telegram
    model = httpx2_mock.post(ANTHROPIC_MESSAGES).mock(
        side_effect=lambda _: sse_response("anthropic", "stream_text.sse")
    )
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(40)
    files.serve("doc-50", png)
    deliver(runtime, document_update(50, name="chart.png", mime="image/png", size=len(png), caption="Read the chart"))

    await telegram_worker(runtime, runner=real_turns(runtime)).drain()

    (content,) = [m["content"] for m in request_json(model.calls[0])["messages"]]
    assert content[0]["type"] == "image" and content[0]["source"]["media_type"] == "image/png"
    assert content[1] == {"type": "text", "text": "Read the chart"}
    assert [m["text"] for m in bot.sent_to(USER)] == ["Hello there!"]
    assert rows(runtime.db.conn(), "SELECT 1 FROM memories") == []  # an image is seen, not kept as text


async def test_in_a_group_the_document_joins_the_groups_memory_not_the_senders(runtime, telegram, httpx2_mock):
    bot, files = telegram
    httpx2_mock.post(ANTHROPIC_MESSAGES).mock(side_effect=lambda _: sse_response("anthropic", "stream_text.sse"))
    pdf = pdf_with_pages(REPORT)
    files.serve("doc-60", pdf)
    update = document_update(60, name="report.pdf", mime="application/pdf", size=len(pdf), caption=f"@{BOT_NAME} keep")
    deliver(runtime, in_group(update, OTHER))

    await telegram_worker(runtime, runner=real_turns(runtime)).drain()

    conn = runtime.db.conn()
    owners = rows(conn, "SELECT DISTINCT owner_user_id FROM memories WHERE source = 'document'")
    assert owners == [{"owner_user_id": f"chat:{GROUP}"}]
    chunk_owners = rows(conn, "SELECT DISTINCT owner_user_id FROM search_chunks WHERE kind = 'memory'")
    assert chunk_owners == [{"owner_user_id": f"chat:{GROUP}"}]
    assert len(bot.sent_to(GROUP)) == 1
