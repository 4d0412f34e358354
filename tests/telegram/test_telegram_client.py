"""The Bot API client's retry policy and typed errors, and the streaming sink, against respx."""

from __future__ import annotations

import httpx
import pytest
import respx

from lib.errors import BadRequest, ChatMigrated, Forbidden, NetworkError, RetryAfter
from lib.telegram.client import TelegramClient
from lib.telegram.format import render
from lib.telegram.sink import TelegramSink
from tests.support.telegram import API, TOKEN, FakeBotAPI, load

CHAT = 408258968


class Sleeps:
    """Records waits instead of sleeping, so tests stay fast and can assert the policy."""

    def __init__(self):
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.fixture
async def http():
    async with httpx.AsyncClient() as client:
        yield client


@pytest.fixture
def bot():
    with respx.mock(assert_all_called=False) as router:
        yield FakeBotAPI(router)


async def test_429_waits_retry_after_then_sends_exactly_one_message(http, bot):
    bot.fail["sendMessage"] = [(429, load("error_429_retry_after.json"))]
    sleeps = Sleeps()
    client = TelegramClient(http, TOKEN, API, sleep=sleeps)
    sent = await client.send_message(CHAT, "hello")
    assert sleeps.waits == [2.0]
    assert bot.methods() == ["sendMessage", "sendMessage"]
    assert [m["text"] for m in bot.sent_to(CHAT)] == ["hello"]
    assert sent.message_id == 5001


async def test_5xx_and_timeouts_are_retried_with_backoff(http):
    with respx.mock() as router:
        route = router.post(f"{API}/bot{TOKEN}/getMe").mock(
            side_effect=[
                httpx.Response(502, text="Bad Gateway"),
                httpx.ReadTimeout("slow"),
                httpx.Response(200, json=load("getMe_ok.json")),
            ]
        )
        sleeps = Sleeps()
        me = await TelegramClient(http, TOKEN, API, sleep=sleeps).get_me()
    assert me["username"] == "el_mon_test_bot"
    assert route.call_count == 3
    # 0.5 s then 1 s, each with jitter (50-100 % of it) so many chats never retry in lockstep.
    assert len(sleeps.waits) == 2 and 0.25 <= sleeps.waits[0] <= 0.5 and 0.5 <= sleeps.waits[1] <= 1.0


async def test_errors_are_typed_and_not_retried(http):
    with respx.mock() as router:
        router.post(f"{API}/bot{TOKEN}/sendMessage").mock(
            side_effect=[
                httpx.Response(403, json=load("error_403_bot_blocked_by_user.json")),
                httpx.Response(400, json=load("error_400_cant_parse_entities_html_ASSEMBLED.json")),
                httpx.Response(
                    400,
                    json={
                        "ok": False,
                        "error_code": 400,
                        "description": "Bad Request: group chat was upgraded to a supergroup chat",
                        "parameters": {"migrate_to_chat_id": -1001234},
                    },
                ),
                httpx.Response(429, json=load("error_429_retry_after.json")),
            ]
        )
        client = TelegramClient(http, TOKEN, API, sleep=Sleeps())
        with pytest.raises(Forbidden):
            await client.send_message(CHAT, "x")
        with pytest.raises(BadRequest, match="can't parse entities"):
            await client.send_message(CHAT, "x")
        with pytest.raises(ChatMigrated) as migrated:
            await client.send_message(CHAT, "x")
        assert migrated.value.new_chat_id == -1001234
        with pytest.raises(RetryAfter) as flood:
            await client.send_message(CHAT, "x", retry_flood=False)
        assert flood.value.retry_after == 2


async def test_network_failure_gives_up_after_the_retries(http):
    with respx.mock() as router:
        route = router.post(f"{API}/bot{TOKEN}/getMe").mock(side_effect=httpx.ConnectError("refused"))
        with pytest.raises(NetworkError):
            await TelegramClient(http, TOKEN, API, retries=2, sleep=Sleeps()).get_me()
    assert route.call_count == 3


async def test_parse_error_is_resent_as_plain_text_without_tags(http, bot):
    bot.fail["sendMessage"] = [(400, load("error_400_cant_parse_entities_html_ASSEMBLED.json"))]
    sink = TelegramSink(TelegramClient(http, TOKEN, API, sleep=Sleeps()), CHAT)
    await sink.finish("**Done**: use `a < b` & <tags>")
    [message] = bot.sent_to(CHAT)
    assert message["parse_mode"] is None
    assert message["text"] == "Done: use a < b & <tags>"
    assert bot.methods() == ["sendMessage", "sendMessage"]


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_streaming_edits_one_message_paced_and_the_final_text_lands(http, bot):
    clock = Clock()
    first_ids: list[list[int]] = []

    async def remember(message_ids: list[int]) -> None:
        # Recorded before any further streaming happens.
        first_ids.append(message_ids)
        assert bot.methods().count("editMessageText") == 0

    sink = TelegramSink(
        TelegramClient(http, TOKEN, API, sleep=Sleeps()), CHAT, interval=1.0, clock=clock, on_new_message=remember
    )
    await sink.typing()
    await sink.update("Hel")
    await sink.update("Hello")  # within the interval: skipped
    clock.now += 1.5
    await sink.update("Hello wor")
    clock.now += 0.2
    await sink.update("Hello world, almost")  # skipped
    await sink.finish("Hello **world**!")
    [message] = bot.sent_to(CHAT)
    assert message["text"] == "Hello <b>world</b>!" and message["parse_mode"] == "HTML"
    assert message["edits"] == 2
    assert first_ids == [[5001]]
    assert bot.methods()[0] == "sendChatAction"


async def test_streaming_slows_down_after_a_429_and_still_finishes(http, bot):
    clock = Clock()
    sink = TelegramSink(TelegramClient(http, TOKEN, API, sleep=Sleeps()), CHAT, interval=1.0, clock=clock)
    await sink.update("one")
    bot.fail["editMessageText"] = [(429, load("error_429_retry_after.json"))]
    clock.now += 1.1
    await sink.update("one two")  # 429: not retried while streaming
    clock.now += 1.1
    await sink.update("one two three")  # still inside retry_after and the doubled interval
    assert bot.methods().count("editMessageText") == 1
    assert sink.interval == 2.0
    await sink.finish("one two three four")
    assert [m["text"] for m in bot.sent_to(CHAT)] == ["one two three four"]


async def test_resumed_turn_edits_the_message_it_started(http, bot):
    started = (await TelegramClient(http, TOKEN, API).send_message(CHAT, "partial …")).message_id
    sink = TelegramSink(TelegramClient(http, TOKEN, API), CHAT, resume_message_ids=[started])
    await sink.finish("the full answer")
    assert [m["text"] for m in bot.sent_to(CHAT)] == ["the full answer"]


async def test_resumed_long_answer_edits_every_part_it_had_sent(http, bot):
    """A crash after part 2 of a long answer: the resumed turn sends no part twice."""
    answer = "\n\n".join(f"Part {i}. " + "text " * 200 for i in range(10))
    recorded: list[list[int]] = []

    async def remember(message_ids: list[int]) -> None:
        recorded.append(message_ids)

    first = TelegramSink(TelegramClient(http, TOKEN, API), CHAT, on_new_message=remember)
    await first.update(answer[:5000])  # two parts on screen, then the process dies
    assert recorded[-1] == first.message_ids and len(first.message_ids) == 2

    resumed = TelegramSink(TelegramClient(http, TOKEN, API), CHAT, resume_message_ids=recorded[-1])
    await resumed.finish(answer)
    sent = bot.sent_to(CHAT)
    assert sorted(bot.messages)[:2] == recorded[-1]
    assert [m["text"] for m in sent] == render(answer), "every part exactly once, no stale extra message"


async def test_long_answer_continues_in_further_messages(http, bot):
    sink = TelegramSink(TelegramClient(http, TOKEN, API), CHAT)
    paragraphs = [f"Part {i}. " + "text " * 200 for i in range(10)]
    await sink.finish("\n\n".join(paragraphs))
    sent = bot.sent_to(CHAT)
    assert len(sent) >= 3
    assert all(len(m["text"]) <= 4096 for m in sent)
    assert sent[0]["text"].startswith("Part 0.") and "Part 9." in sent[-1]["text"]


async def test_message_not_modified_is_ignored(http, bot):
    client = TelegramClient(http, TOKEN, API)
    sent = await client.send_message(CHAT, "same")
    await client.edit_message_text(CHAT, sent.message_id, "same")  # 400 "message is not modified"
    assert bot.methods() == ["sendMessage", "editMessageText"]


async def test_a_slow_typing_action_never_holds_up_the_answer(http, monkeypatch):
    import asyncio

    import lib.telegram.sink

    monkeypatch.setattr(lib.telegram.sink, "TYPING_GRACE", 0.05)
    answer_now = asyncio.Event()  # never set: Telegram does not answer the action
    asked: list[str] = []

    async def hang(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.path)
        await answer_now.wait()
        return httpx.Response(200, json={"ok": True, "result": True})

    with respx.mock(assert_all_called=False) as router:
        router.post(f"{API}/bot{TOKEN}/sendChatAction").mock(side_effect=hang)  # before the fake's catch-all
        bot = FakeBotAPI(router)
        sink = TelegramSink(TelegramClient(http, TOKEN, API, sleep=Sleeps()), CHAT)
        await asyncio.wait_for(sink.typing(), 0.01)  # returns at once: the action runs in the background
        await sink.typing()  # one action in flight at a time
        await asyncio.wait_for(sink.finish("Here it is."), 5)
    assert len(asked) == 1
    assert [m["text"] for m in bot.sent_to(CHAT)] == ["Here it is."]
    assert sink._typing is None  # the hung action was dropped, not left to land after the answer


async def test_a_failing_typing_action_is_only_logged(http, bot):
    bot.fail["sendChatAction"] = [(400, load("sendMessage_400_chat_not_found.json"))]
    sink = TelegramSink(TelegramClient(http, TOKEN, API, sleep=Sleeps()), CHAT)
    await sink.typing()
    await sink.finish("Still answered.")
    assert bot.methods() == ["sendChatAction", "sendMessage"]
