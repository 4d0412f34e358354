"""`ash chat` without a terminal: Telegram's slash commands answered locally, `--user`, tool lines on
stderr. Driven through click's CliRunner, the model stubbed by httpx2_mock."""

from __future__ import annotations

import httpx
import pytest
from click.testing import CliRunner

import lib.llm.router as router
from lib.commands.cli import cli
from lib.db import connect
from lib.memory import store
from tests.support.agent import (
    ANTHROPIC_MESSAGES,
    OPENAI_CHAT,
    SSE,
    RecordingSleep,
    raw,
    request_json,
    set_keys,
    sse_response,
    tool_calls,
    write_config,
)

OWNER = "1001"


@pytest.fixture
def configured(ash_home, db_path, monkeypatch):
    write_config(ash_home, f'owner = {OWNER}\n[embeddings]\nprovider = "none"\n')
    set_keys(monkeypatch)
    monkeypatch.setattr(router, "DEFAULT_POLICY", router.RetryPolicy(sleep=RecordingSleep()))
    return ash_home


def profile_timezone(home, user_id: str) -> str | None:
    conn = connect(home / "ash.db")
    try:
        profile = store.get_profile(conn, user_id)
        return profile.timezone if profile else None
    finally:
        conn.close()


def test_slash_commands_are_answered_by_the_telegram_handlers_not_the_model(configured, httpx2_mock):
    # No route for the model: a command sent to it as text would fail the test.
    lines = "/help\n/timezone Europe/Lisbon\n/timezone\n/memory\nexit\n"

    result = CliRunner().invoke(cli, ["chat"], input=lines)

    assert result.exit_code == 0, result.output
    assert "/timezone - show or set your time zone" in result.output
    assert "In the terminal: exit or Ctrl-D leaves" in result.output
    assert "Your time zone is now Europe/Lisbon" in result.output
    assert "Your time zone is Europe/Lisbon." in result.output
    assert "I don't know anything about you yet." in result.output
    assert profile_timezone(configured, OWNER) == "Europe/Lisbon"


def test_an_unknown_command_goes_to_the_model_as_in_telegram(configured, httpx2_mock):
    route = httpx2_mock.post(ANTHROPIC_MESSAGES).mock(return_value=sse_response("anthropic", "stream_text.sse"))

    result = CliRunner().invoke(cli, ["chat", "/weather in Lisbon"])

    assert result.exit_code == 0 and result.output == "Hello there!\n"
    assert request_json(route.calls.last)["messages"][-1]["content"][0]["text"] == "/weather in Lisbon"


def test_forget_offers_its_buttons_as_numbered_choices(configured, httpx2_mock):
    httpx2_mock.post(ANTHROPIC_MESSAGES).mock(return_value=sse_response("anthropic", "stream_text.sse"))
    runner = CliRunner()
    runner.invoke(cli, ["chat", "My name is Ada."])

    kept = runner.invoke(cli, ["chat"], input="/forget\n2\nexit\n")
    forgotten = runner.invoke(cli, ["chat"], input="/forget\n1\nexit\n")

    assert "1. Yes, forget me" in kept.output and "2. Cancel" in kept.output
    assert "Okay, I forgot nothing." in kept.output
    assert "Done: I forgot everything about you (" in forgotten.output
    conn = connect(configured / "ash.db")
    assert conn.execute("SELECT count(*) FROM messages WHERE owner_user_id = ?", (OWNER,)).fetchone() == (0,)
    # The audit log names the channel the person used.
    assert conn.execute("SELECT actor FROM audit_log WHERE action = 'forget_user'").fetchone() == (f"cli:{OWNER}",)
    conn.close()


def test_model_offers_the_presets_as_numbered_choices_and_the_pick_answers_later_runs(configured, httpx2_mock):
    write_config(
        configured,
        f'owner = {OWNER}\n[embeddings]\nprovider = "none"\n'
        '[models.mini]\nprovider = "openai"\nmodel = "gpt-4o-mini"\n',
    )
    route = httpx2_mock.post(OPENAI_CHAT).mock(
        return_value=sse_response("openai", "chat_stream_text_after_tool_result.sse")
    )
    runner = CliRunner()

    listed = runner.invoke(cli, ["chat"], input="/model\n2\nexit\n")
    answered = runner.invoke(cli, ["chat", "Capital of the UK?"])

    assert "`default`: anthropic claude-sonnet-4-6 (current)" in listed.output
    assert "1. ✓ default" in listed.output and "2. mini" in listed.output
    assert "This chat now uses mini: openai gpt-4o-mini." in listed.output
    assert answered.exit_code == 0 and answered.output == "The capital of the UK is London.\n"
    assert request_json(route.calls.last)["model"] == "gpt-4o-mini"


def test_user_option_talks_as_that_user_in_a_conversation_of_their_own(configured, httpx2_mock):
    route = httpx2_mock.post(ANTHROPIC_MESSAGES).mock(return_value=sse_response("anthropic", "stream_text.sse"))
    runner = CliRunner()

    as_guest = runner.invoke(cli, ["chat", "--user", "42", "I am the guest."])
    as_owner = runner.invoke(cli, ["chat", "And I am the owner."])
    timezone = runner.invoke(cli, ["chat", "--user", "42", "/timezone Asia/Tokyo"])

    assert as_guest.exit_code == as_owner.exit_code == timezone.exit_code == 0
    guest_request, owner_request = (request_json(call) for call in route.calls)
    assert "user id 42" in guest_request["system"]
    assert "user id 1001" in owner_request["system"]
    # The owner's conversation does not continue the guest's.
    assert [m["content"][0]["text"] for m in owner_request["messages"]] == ["And I am the owner."]
    assert profile_timezone(configured, "42") == "Asia/Tokyo"
    assert profile_timezone(configured, OWNER) is None


def test_a_tool_run_is_a_line_on_stderr_and_stdout_keeps_only_the_answer(configured, httpx2_mock):
    tool_call = tool_calls(("set_timezone", {"timezone": "Europe/Lisbon"}))
    httpx2_mock.post(ANTHROPIC_MESSAGES).mock(
        side_effect=[httpx.Response(200, content=tool_call, headers=SSE), sse_response("anthropic", "stream_text.sse")]
    )

    result = CliRunner().invoke(cli, ["chat", "I live in Lisbon."])

    assert result.exit_code == 0, result.output
    assert result.stderr == "[tool] set_timezone: Europe/Lisbon\n"
    sentence = "I'll help you find out who is the youngest"
    assert result.stdout.startswith(sentence)
    # The sentence streamed before the tool ran is printed once, the answer after it on its own line.
    assert result.stdout.count(sentence) == 1 and result.stdout.endswith("ages.\nHello there!\n")
    assert profile_timezone(configured, OWNER) == "Europe/Lisbon"


def test_the_tool_line_shows_a_failed_run(configured, httpx2_mock):
    tool_call = raw("anthropic", "stream_tool_use_input_json_delta.sse")
    httpx2_mock.post(ANTHROPIC_MESSAGES).mock(
        side_effect=[httpx.Response(200, content=tool_call, headers=SSE), sse_response("anthropic", "stream_text.sse")]
    )

    result = CliRunner().invoke(cli, ["chat", "What's the weather?"])

    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[-1] == "[tool] get_weather failed"


def test_followups_turned_on_in_the_terminal_notice_an_event_for_the_private_telegram_chat(configured, httpx2_mock):
    route = httpx2_mock.post(ANTHROPIC_MESSAGES).mock(return_value=sse_response("anthropic", "stream_text.sse"))
    runner = CliRunner()
    assert runner.invoke(cli, ["chat", "/followups on"]).output.startswith("Follow-ups are on.")

    assert runner.invoke(cli, ["chat", "I have a job interview tomorrow at 10"]).exit_code == 0

    assert route.call_count == 1  # the answer; noticing the event asked no model
    conn = connect(configured / "ash.db")
    try:
        [row] = conn.execute("SELECT chat_id, text, purpose FROM schedules").fetchall()
    finally:
        conn.close()
    assert row == (OWNER, "job interview", "followup")
