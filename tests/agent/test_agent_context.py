"""The context budget (recency window always kept) and compaction into a stored summary."""

from __future__ import annotations

import json

import httpx
import pytest

from lib.agent import TurnInput, run_turn
from lib.agent.history import select_history
from lib.db import rows
from lib.memory import store
from lib.memory.store import StoredMessage
from tests.support.agent import (
    ANTHROPIC_MESSAGES,
    RecordingSink,
    body,
    configured_runtime,
    raw,
    request_json,
)

# Model retries wait no real time.
pytestmark = pytest.mark.usefixtures("sleeps")

OWNER = "1001"


def _message(i: int, tokens: int) -> StoredMessage:
    return StoredMessage(i, 1, OWNER, "user" if i % 2 else "assistant", f"m{i}", tokens, "", None, {}, None)


def test_select_history_keeps_the_window_even_over_budget_and_fills_newest_first():
    messages = [_message(i, 100) for i in range(1, 11)]

    assert [m.id for m in select_history(messages, budget=0, recency_window=3)] == [8, 9, 10]
    assert [m.id for m in select_history(messages, budget=550, recency_window=3)] == [6, 7, 8, 9, 10]
    assert [m.id for m in select_history(messages, budget=10_000, recency_window=3)] == list(range(1, 11))


def test_select_history_stays_contiguous():
    messages = [_message(1, 10), _message(2, 500), _message(3, 10), _message(4, 10)]

    # Message 1 would fit on its own, but skipping 2 would leave a hole in the conversation.
    assert [m.id for m in select_history(messages, budget=100, recency_window=2)] == [3, 4]


def _respond(request: httpx.Request) -> httpx.Response:
    """Streamed calls get the recorded stream; the summary call gets the recorded text reply."""
    if json.loads(request.content).get("stream"):
        return httpx.Response(
            200, content=raw("anthropic", "stream_text.sse"), headers={"content-type": "text/event-stream"}
        )
    return httpx.Response(200, json=body("anthropic", "messages_text.json"))


def _seed(runtime, count: int, size: int = 400) -> list[int]:
    conn = runtime.db.conn()
    session = store.open_session(conn, "telegram", "42", OWNER, "private")
    ids = []
    for i in range(count):
        role = "user" if i % 2 == 0 else "assistant"
        ids.append(store.add_message(conn, session.id, OWNER, role, f"message {i:03d} " + "x" * size))
    return ids


async def test_tight_budget_keeps_the_recency_window_intact(ash_home, monkeypatch, httpx2_mock):
    runtime = configured_runtime(
        ash_home,
        monkeypatch,
        f'owner = {OWNER}\n[embeddings]\nprovider = "none"\n[memory]\ncontext_token_budget = 3000\n'
        "system_prompt_buffer = 1000\nrecency_window = 4\nmax_context_messages = 30\ncompaction_enabled = false\n",
    )
    _seed(runtime, 30)  # about 103 tokens each: far more than the 2000 left for history
    route = httpx2_mock.post(ANTHROPIC_MESSAGES).mock(side_effect=_respond)

    await run_turn(runtime, TurnInput("telegram", "42", OWNER, "and now?"), RecordingSink())

    sent = request_json(route.calls.last)["messages"]
    texts = [m["content"][0]["text"] for m in sent]
    assert texts[-1] == "and now?"
    history = texts[:-1]
    # The last four stored messages are there, in order, whole.
    assert history[-4:] == [f"message {i:03d} " + "x" * 400 for i in range(26, 30)]
    # Older ones filled the rest of the budget only (the first sent message is a user message).
    assert 4 < len(history) < 30
    assert "message 000" not in "".join(history)
    assert sum(len(t) for t in history) // 4 <= 3000 - 1000
    runtime.db.close()


async def test_compaction_summarizes_old_messages_and_keeps_them_searchable(ash_home, monkeypatch, httpx2_mock):
    runtime = configured_runtime(
        ash_home,
        monkeypatch,
        f'owner = {OWNER}\n[embeddings]\nprovider = "none"\n[memory]\nrecency_window = 4\nmax_context_messages = 8\n',
    )
    ids = _seed(runtime, 8, size=20)
    route = httpx2_mock.post(ANTHROPIC_MESSAGES).mock(side_effect=_respond)

    await run_turn(runtime, TurnInput("telegram", "42", OWNER, "first"), RecordingSink())

    # Extraction reads the person's messages before they are folded (tests below: a failure waits).
    extraction_call = request_json(route.calls[1])
    assert "New messages from the user" in extraction_call["messages"][0]["content"][0]["text"]
    # 10 unsummarized messages > max_context_messages: everything but the newest 4 is summarized.
    summary_call = request_json(route.calls[2])
    assert summary_call.get("stream") is not True
    assert "message 000" in summary_call["messages"][0]["content"][0]["text"]
    conn = runtime.db.conn()
    session = rows(conn, "SELECT summary, summary_through FROM sessions")[0]
    assert session["summary"] == "The capital of France is Paris."
    all_ids = [r["id"] for r in rows(conn, "SELECT id FROM messages ORDER BY id")]
    assert len(all_ids) == 10 and session["summary_through"] == all_ids[-5]
    assert all_ids[:8] == ids  # nothing deleted
    purposes = [r["purpose"] for r in rows(conn, "SELECT purpose FROM usage ORDER BY id")]
    assert purposes == ["chat", "extraction", "compaction"]

    await run_turn(runtime, TurnInput("telegram", "42", OWNER, "second"), RecordingSink())

    next_call = request_json(route.calls[3])
    assert "<summary>\nThe capital of France is Paris.\n</summary>" in next_call["system"]
    sent = [m["content"][0]["text"] for m in next_call["messages"]]
    assert not any(t.startswith("message 000") for t in sent)
    assert sent[-1] == "second"
    runtime.db.close()


async def test_compaction_waits_while_extraction_fails_and_drops_nothing(ash_home, monkeypatch, httpx2_mock):
    config = (
        f'owner = {OWNER}\n[embeddings]\nprovider = "none"\n[memory]\nrecency_window = 4\nmax_context_messages = 8\n'
    )
    runtime = configured_runtime(ash_home, monkeypatch, config, openai=False)
    _seed(runtime, 8, size=20)
    failing = [True]
    refused = body("anthropic", "error_400_invalid_request_error.http.json")

    def respond(request: httpx.Request) -> httpx.Response:
        if json.loads(request.content).get("stream") or not failing[0]:
            return _respond(request)
        return httpx.Response(400, json=refused)

    route = httpx2_mock.post(ANTHROPIC_MESSAGES).mock(side_effect=respond)
    await run_turn(runtime, TurnInput("telegram", "42", OWNER, "first"), RecordingSink())
    conn = runtime.db.conn()
    assert rows(conn, "SELECT summary, summary_through FROM sessions")[0] == {"summary": None, "summary_through": None}
    purposes = [r["purpose"] for r in rows(conn, "SELECT purpose FROM usage ORDER BY id")]
    assert "compaction" not in purposes
    assert len(rows(conn, "SELECT id FROM messages")) == 10  # nothing dropped

    # Once extraction answers, the next turn's compaction goes ahead, extraction first.
    failing[0] = False
    await run_turn(runtime, TurnInput("telegram", "42", OWNER, "second"), RecordingSink())
    assert rows(conn, "SELECT summary FROM sessions")[0]["summary"] == "The capital of France is Paris."
    purposes = [r["purpose"] for r in rows(conn, "SELECT purpose FROM usage ORDER BY id")]
    assert purposes[-2:] == ["extraction", "compaction"]
    assert route.calls.call_count >= 4
    runtime.db.close()
