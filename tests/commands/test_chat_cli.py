"""`ash chat` and `ash usage` through click's CliRunner, the models stubbed by httpx2_mock."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import lib.llm.router as router
from lib.commands.cli import cli
from tests.support.agent import (
    ANTHROPIC_MESSAGES,
    RecordingSleep,
    request_json,
    set_keys,
    sse_response,
    write_config,
)


@pytest.fixture
def configured(ash_home, db_path, monkeypatch):
    write_config(ash_home, 'owner = 1001\n[embeddings]\nprovider = "none"\n')
    set_keys(monkeypatch)
    monkeypatch.setattr(router, "DEFAULT_POLICY", router.RetryPolicy(sleep=RecordingSleep()))
    return ash_home


def test_chat_without_a_key_says_which_variable_to_set(ash_home):
    result = CliRunner().invoke(cli, ["chat", "hello"])

    assert result.exit_code == 1
    assert "ANTHROPIC_API_KEY" in result.output


def test_chat_twice_the_second_turn_sees_the_first_exchange(configured, httpx2_mock):
    route = httpx2_mock.post(ANTHROPIC_MESSAGES).mock(
        side_effect=[sse_response("anthropic", "stream_text.sse"), sse_response("anthropic", "stream_text.sse")]
    )
    runner = CliRunner()

    first = runner.invoke(cli, ["chat", "My name is Ada."])
    second = runner.invoke(cli, ["chat", "What is my name?"])

    assert first.exit_code == 0 and first.stdout == "Hello there!\n"
    assert second.exit_code == 0
    sent = request_json(route.calls.last)["messages"]
    assert [(m["role"], m["content"][0]["text"]) for m in sent] == [
        ("user", "My name is Ada."),
        ("assistant", "Hello there!"),
        ("user", "What is my name?"),
    ]
    # `ash chat` runs as the configured owner.
    assert "user id 1001" in request_json(route.calls.last)["system"]


def test_interactive_loop_answers_each_line_until_exit(configured, httpx2_mock):
    route = httpx2_mock.post(ANTHROPIC_MESSAGES).mock(return_value=sse_response("anthropic", "stream_text.sse"))

    result = CliRunner().invoke(cli, ["chat"], input="hi\n/new\nhello again\nexit\n")

    assert result.exit_code == 0
    assert result.output.count("Hello there!") == 2
    assert "Started a new conversation." in result.output
    # Piped, the output is the answers only: no `you> ` prompts and no `ash> ` marks in it.
    assert "you>" not in result.output and "ash>" not in result.output
    # /new closed the session: the second turn starts without the first exchange.
    assert [m["content"][0]["text"] for m in request_json(route.calls.last)["messages"]] == ["hello again"]


def test_chat_failure_exits_non_zero_with_the_reason(configured, httpx2_mock):
    import httpx

    from tests.support.agent import body

    invalid = body("anthropic", "error_400_invalid_request_error.http.json")
    httpx2_mock.post(ANTHROPIC_MESSAGES).mock(return_value=httpx.Response(400, json=invalid))

    result = CliRunner().invoke(cli, ["chat", "hi"])

    assert result.exit_code == 1
    assert "Error: The model refused this request as invalid" in result.output


def test_usage_shows_totals_per_day_and_user(configured, httpx2_mock, monkeypatch):
    httpx2_mock.post(ANTHROPIC_MESSAGES).mock(return_value=sse_response("anthropic", "stream_text.sse"))
    runner = CliRunner()
    assert runner.invoke(cli, ["usage"]).output.startswith("No LLM usage recorded")
    runner.invoke(cli, ["chat", "hi"])
    runner.invoke(cli, ["chat", "hi again"])

    result = runner.invoke(cli, ["usage"])

    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == ["day", "user", "calls", "input", "output", "cost", "USD"]
    day_row = lines[1].split()
    assert day_row[1:5] == ["1001", "2", "22", "12"]
    assert lines[-1].split()[:4] == ["total", "2", "22", "12"]
