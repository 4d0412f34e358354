"""Attack: files and pages built to be slow or huge to parse.

A 20 KB PDF (100 pages drawing one 2 MB content stream) took pypdf 17 minutes; six small ones
from one person, in six chats, held every thread of the default executor, and another person's
"hello" waited 14 minutes. trafilatura spends minutes on a page of small tables, after
web_fetch's timeout. Now every PDF and HTML parse runs in a parser process (lib/senses/parsing.py)
that is killed at its deadline, capped in memory and CPU by the kernel, two at a time, awaited
without a thread. The hostile files are made in the test (tests/support/bombs.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx
import pytest
import respx

from lib.config import WebFetchConfig
from lib.senses.documents import SLOW, DocumentText, UnreadableDocument, read_document
from lib.senses.parsing import MEMORY_BYTES, SLOTS
from lib.senses.web import PageUnavailable, WebFetcher
from lib.telegram.updates import telegram_worker
from tests.support.bombs import slow_pdf, table_page
from tests.support.database import inbox_statuses
from tests.support.documents import BOT_NAME, Files, document_update, in_group
from tests.support.pdf import pdf_with_pages
from tests.support.processes import environment, gone, parser_processes
from tests.support.telegram import FakeBotAPI, deliver, echo_runner, make_runtime, point_at_fake_bot_api, private_text
from tests.support.web_pages import LOOPBACK, PageServer

# A generous ceiling for waiting on an event; never a measure of speed.
CEILING = 60.0
ARTICLE = (
    "<!doctype html><html><head><title>Green tea</title></head><body><article><h1>Green tea</h1>"
    "<p>Green tea wants water at about eighty degrees Celsius, never boiling, or the leaves turn bitter.</p>"
    "<p>Steep it for two minutes at most, then pour all of it out; a second steeping is often better.</p>"
    "</article></body></html>"
)


class Parsers:
    """Watches this process's parser processes while a test runs: every pid seen, and the most at once."""

    def __init__(self) -> None:
        self.seen: set[int] = set()
        self.most = 0
        self.environments: list[set[str]] = []
        self._task: asyncio.Task | None = None

    async def _watch(self) -> None:
        while True:
            running = parser_processes()
            self.environments += [environment(pid) for pid in running - self.seen]
            self.seen |= running
            self.most = max(self.most, len(running))
            await asyncio.sleep(0.02)

    def __enter__(self) -> Parsers:
        self._task = asyncio.get_running_loop().create_task(self._watch())
        return self

    def __exit__(self, *exc) -> None:
        assert self._task is not None
        self._task.cancel()

    def all_gone(self) -> bool:
        return all(gone(pid) for pid in self.seen)


async def until(condition: Callable[[], bool], what: str) -> None:
    """Wait for `condition`, checking every 20 ms, up to CEILING seconds."""
    try:
        async with asyncio.timeout(CEILING):
            while not condition():
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"waited {CEILING:g} s for {what}") from None


@pytest.fixture
def server():
    pages = PageServer()
    yield pages
    pages.close()


async def test_a_pdf_built_to_be_slow_is_stopped_at_its_deadline_and_the_next_one_is_read(monkeypatch):
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "123:a-secret-no-parser-may-read")
    with Parsers() as parsers:
        with pytest.raises(UnreadableDocument) as refused:
            await read_document(
                slow_pdf(), name="bomb.pdf", mime_type="application/pdf", max_pages=100, max_chars=400_000, timeout=2.0
            )
        assert str(refused.value) == SLOW.format(seconds=2.0)
        # It ran in its own process, which was killed and reaped: nothing is left of it.
        assert len(parsers.seen) == 1 and parsers.all_gone()
        # A parser starts with PATH and the locale at most: no token or key for a parser bug to find.
        assert parsers.environments and all("TELEGRAM_BOT_TOKEN" not in names for names in parsers.environments)

        document = await read_document(
            pdf_with_pages([["The lantern room needs new glazing."]]),
            name="report.pdf",
            mime_type="application/pdf",
            max_pages=100,
            max_chars=400_000,
            timeout=30.0,
        )
    assert isinstance(document, DocumentText) and document.text == "The lantern room needs new glazing."
    assert parsers.all_gone()


async def test_a_page_of_small_tables_is_stopped_within_the_fetch_timeout(server):
    server.page("/tables", table_page())  # 1.3 MB: over a minute of trafilatura
    server.page("/tea", ARTICLE)
    fetcher = WebFetcher(WebFetchConfig(timeout=3.0), trusted=LOOPBACK)
    with Parsers() as parsers:
        with pytest.raises(PageUnavailable) as unavailable:
            await fetcher.fetch(server.url("/tables"))
        assert str(unavailable.value) == "the page is too complex to read within the 3 s web_fetch has for a page"
        assert parsers.seen and parsers.all_gone()

        page = await WebFetcher(WebFetchConfig(timeout=30.0), trusted=LOOPBACK).fetch(server.url("/tea"))
    assert page.title == "Green tea" and "eighty degrees Celsius" in page.text
    assert parsers.all_gone()


async def test_a_page_that_needs_gigabytes_to_parse_is_stopped_at_the_memory_cap(server):
    # A million unopened paragraphs: 3 MB that take lxml and trafilatura 900 MB (and 200 s).
    server.page("/paragraphs", "<html><body><article>" + "<p>" * 1_000_000 + "</article></body></html>")
    fetcher = WebFetcher(WebFetchConfig(timeout=CEILING), trusted=LOOPBACK)
    with Parsers() as parsers, pytest.raises(PageUnavailable) as unavailable:
        await fetcher.fetch(server.url("/paragraphs"))
    limit = MEMORY_BYTES // 2**20
    assert str(unavailable.value) == f"the page is too large to read: reading it needs more memory than {limit} MB"
    assert parsers.seen and parsers.all_gone()


OWNER, SENDER, BYSTANDER = 1001, 2002, 3003
BOMBS = 6


@pytest.fixture
async def runtime(db_path, ash_home, monkeypatch):
    # A long read deadline: the bombs are still being read while the bystander talks.
    point_at_fake_bot_api(
        monkeypatch,
        ash_home,
        f"owner = {OWNER}\n[telegram]\nallowed_users = [{SENDER}, {BYSTANDER}]\n"
        '[embeddings]\nprovider = "none"\n[documents]\nread_timeout = 600.0\n',
    )
    async with httpx.AsyncClient() as http:
        runtime = make_runtime(http)
        yield runtime
        runtime.db.close()


def typing_in(bot: FakeBotAPI) -> set[int]:
    """The chats the bot showed "typing" in: a document's chat gets it just before it is read."""
    return {body["chat_id"] for method, body in bot.calls if method == "sendChatAction"}


@pytest.fixture
def telegram():
    with respx.mock(assert_all_called=False) as router:
        files = Files(router)  # routes added first win over the fake Bot API's catch-all
        yield FakeBotAPI(router), files


async def test_six_slow_pdfs_from_one_person_do_not_hold_up_another_persons_hello(runtime, telegram, db_path):
    bot, files = telegram
    bomb = slow_pdf()
    bombs = []
    for n in range(BOMBS):
        caption = f"@{BOT_NAME} what does it say?"
        update = document_update(
            100 + n, name=f"report-{n}.pdf", mime="application/pdf", size=len(bomb), caption=caption
        )
        bombs.append(in_group(update, SENDER, chat_id=-100_000 - n))
        files.serve(f"doc-{100 + n}", bomb)
    worker = telegram_worker(runtime, runner=echo_runner())
    deliver(runtime, *bombs)
    draining = asyncio.create_task(worker.drain())
    try:
        with Parsers() as parsers:
            # Every bomb is downloaded and being read (the typing action comes just before reading).
            await until(lambda: len(typing_in(bot)) == BOMBS, "six bombs being read")
            deliver(runtime, private_text(200, "hello", BYSTANDER, username="bystander"))
            await worker.pump()  # what the webhook's kick does
            await until(lambda: inbox_statuses(db_path)[200] == "done", "the bystander's answer")

            assert [m["text"] for m in bot.sent_to(BYSTANDER)] == ["You said: hello"]
            statuses = inbox_statuses(db_path)
            assert statuses[200] == "done"
            assert all(statuses[bomb["update_id"]] != "done" for bomb in bombs)  # still being read
            assert parsers.most == SLOTS  # two read at a time; the other four wait, holding no thread
    finally:
        await worker.stop()  # shutdown cancels the reads: each parser is killed and reaped
        draining.cancel()
    assert parsers.seen and parsers.all_gone()
    assert parser_processes() == set()
