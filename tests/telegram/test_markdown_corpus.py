"""Every Markdown input of the committed corpus renders to messages Telegram's HTML rules accept.

The corpus (tests/fixtures/markdown/) is the cases of issue 14, hand-written tricky inputs and
generated combinations of emphasis, code, links, lists, headings, quotes and tables
(tests/telegram/markdown_corpus.py). Each is rendered whole and split at smaller limits; every
message must pass lib/telegram/html_rules.py and fit, and splitting must lose no text.
"""

from __future__ import annotations

import re

import httpx
import pytest
import respx

from lib.telegram.client import TelegramClient
from lib.telegram.format import MAX_MESSAGE_UNITS, render, utf16_len, visible_text
from lib.telegram.html_rules import message_violation
from lib.telegram.sink import TelegramSink
from tests.support.telegram import API, TOKEN, FakeBotAPI
from tests.telegram import markdown_corpus

CASES = markdown_corpus.all_cases()
HAND_WRITTEN = markdown_corpus.load(markdown_corpus.HAND_WRITTEN)
# Telegram's limit, then limits small enough to cut inside most cases' blocks and lines.
LIMITS = (MAX_MESSAGE_UNITS, 200, 40)


def assert_accepted(parts: list[str], limit: int) -> None:
    for part in parts:
        assert message_violation(part) is None, (message_violation(part), part)
        assert utf16_len(visible_text(part)) <= limit


def shown(parts: list[str]) -> str:
    """The text a reader sees across the messages, whitespace aside (cuts may drop it)."""
    return re.sub(r"\s", "", "".join(visible_text(part) for part in parts))


def test_the_corpus_holds_the_issue_cases_and_at_least_200_inputs():
    assert len(CASES) >= 200
    issue = dict(HAND_WRITTEN)
    assert issue["issue 14: bold around inline code"] == "**bold `code`**"
    assert issue["issue 14: link around inline code"] == "[`x`](https://example.com)"
    assert issue["issue 14: URL with parentheses"] == "[x](https://en.wikipedia.org/wiki/Foo_(bar))"
    assert issue["issue 14: triple asterisks"] == "***x***"


def test_the_generated_corpus_is_what_the_generator_writes():
    assert markdown_corpus.GENERATED.read_text(encoding="utf-8") == markdown_corpus.generated_text()


@pytest.mark.parametrize(("name", "markdown"), CASES, ids=[name for name, _ in CASES])
def test_every_case_renders_to_messages_telegram_accepts_at_every_split(name, markdown):
    whole = render(markdown)
    for limit in LIMITS:
        parts = render(markdown, limit)
        assert_accepted(parts, limit)
        assert shown(parts) == shown(whole), f"text lost splitting at {limit}"


def test_the_whole_corpus_as_one_long_answer_splits_into_accepted_messages():
    answer = "\n\n".join(markdown for _, markdown in CASES)
    parts = render(answer)
    assert len(parts) >= 5
    assert_accepted(parts, MAX_MESSAGE_UNITS)
    assert shown(parts) == shown(render(answer, limit=len(answer) * 2)), "text lost between messages"


async def test_streaming_the_hand_written_corpus_sends_telegram_only_accepted_html():
    """The real sink, edit by edit, as the answer grows through half-written syntax."""
    answer = "\n\n".join(markdown for _, markdown in HAND_WRITTEN)
    with respx.mock(assert_all_called=False) as router:
        bot = FakeBotAPI(router)
        async with httpx.AsyncClient() as http:
            sink = TelegramSink(TelegramClient(http, TOKEN, API), 408258968, interval=0)
            for end in range(61, len(answer), 61):
                await sink.update(answer[:end])
            await sink.finish(answer)
    sent = [body["text"] for method, body in bot.calls if method in {"sendMessage", "editMessageText"}]
    assert len(sent) > 50
    assert all(body.get("parse_mode") == "HTML" for method, body in bot.calls if method == "sendMessage")
    assert_accepted(sent, MAX_MESSAGE_UNITS)
    assert [message["text"] for message in bot.messages.values()] == render(answer)
