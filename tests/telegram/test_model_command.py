"""/model in Telegram: the presets listed with a button each, a press or /model NAME switching the
chat, only the owner switching in a group, and the next turn asking the picked model. Through the
real Telegram handler over a real SQLite file and the fake Bot API; the model through httpx2_mock."""

from __future__ import annotations

import httpx
import pytest

from lib.agent import run_turn
from lib.telegram.updates import telegram_worker
from tests.support.agent import OPENAI_CHAT, request_json, set_keys, sse_response, write_config
from tests.support.database import query
from tests.support.telegram import (
    API,
    GROUP,
    TOKEN,
    as_shown,
    button_press,
    buttons,
    deliver,
    echo_runner,
    group_text,
    make_runtime,
    private_text,
)
from tests.telegram.conftest import USER

MEMBER = 2002
PRESETS = """
[models.mini]
provider = "openai"
model = "gpt-4o-mini"

[models.haiku]
provider = "anthropic"
model = "claude-haiku-4-5"
"""
SETTINGS = f'owner = {USER}\n[telegram]\nallowed_users = [{MEMBER}]\n[embeddings]\nprovider = "none"\n'
FAMILY = {"id": GROUP, "type": "supergroup", "title": "Family"}
PRIVATE = {"id": USER, "type": "private", "first_name": "Hirrolot"}


def configure(home, monkeypatch, presets: str = PRESETS) -> None:
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", TOKEN)
    monkeypatch.setenv("TELEGRAM_API_BASE", API)
    set_keys(monkeypatch)
    write_config(home, SETTINGS + presets)


@pytest.fixture
def env(db_path, monkeypatch, ash_home):
    configure(ash_home, monkeypatch)
    return db_path


async def process(runtime, *updates: dict, runner=None) -> None:
    deliver(runtime, *updates)
    await telegram_worker(runtime, runner=runner or echo_runner()).drain()


def picks(env) -> list[dict]:
    return query(env, "SELECT provider, chat_id, preset FROM chat_models")


def methods(bot, name: str) -> list[dict]:
    return [body for method, body in bot.calls if method == name]


async def test_model_lists_the_presets_marks_the_current_one_and_offers_a_button_each(runtime, bot):
    await process(runtime, private_text(400, "/model"))

    [listing] = bot.sent_to(USER)
    assert "This chat uses the default model, anthropic claude-sonnet-4-6." in listing["text"]
    assert "<code>default</code>: anthropic claude-sonnet-4-6 (current)" in listing["text"]
    assert "<code>mini</code>: openai gpt-4o-mini\n" in listing["text"]
    assert "<code>haiku</code>: anthropic claude-haiku-4-5" in listing["text"]
    assert buttons(listing) == [("✓ default", "model:default"), ("mini", "model:mini"), ("haiku", "model:haiku")]


async def test_a_press_switches_the_chat_once_and_edits_the_message_to_say_so(runtime, bot, env):
    await process(runtime, private_text(401, "/model"))
    shown = as_shown(bot, PRIVATE)

    await process(runtime, button_press(402, "model:mini", shown, USER), button_press(403, "model:haiku", shown, USER))

    [edit] = methods(bot, "editMessageText")
    assert edit["text"] == "This chat now uses mini: openai gpt-4o-mini."
    assert "reply_markup" not in edit  # the buttons go: the choice is made
    assert [body.get("text") for body in methods(bot, "answerCallbackQuery")] == ["Switched.", "Already done."]
    assert picks(env) == [{"provider": "telegram", "chat_id": str(USER), "preset": "mini"}]

    await process(runtime, private_text(404, "/model"))
    relisted = bot.sent_to(USER)[-1]
    assert "This chat uses <code>mini</code>: openai gpt-4o-mini." in relisted["text"]
    assert ("✓ mini", "model:mini") in buttons(relisted)


async def test_model_name_switches_directly_and_default_switches_back(runtime, bot, env):
    await process(runtime, private_text(405, "/model Haiku"))
    assert picks(env)[0]["preset"] == "haiku"
    await process(runtime, private_text(406, "/model default"))
    await process(runtime, private_text(407, "/model gpt-5"))

    switched, back, unknown = (m["text"] for m in bot.sent_to(USER))
    assert switched == "This chat now uses haiku: anthropic claude-haiku-4-5."
    assert back == "This chat now uses the default model, anthropic claude-sonnet-4-6."
    assert unknown == (
        "There is no model preset <code>gpt-5</code>. The presets are "
        "<code>default</code>, <code>mini</code>, <code>haiku</code>."
    )
    assert picks(env) == []


async def test_in_a_group_a_member_sees_the_list_but_only_the_owner_switches(runtime, bot, env):
    await process(runtime, group_text(410, "/model", MEMBER), group_text(411, "/model mini", MEMBER))

    for refused in bot.sent_to(GROUP):
        assert "This chat uses the default model" in refused["text"]
        assert refused["text"].endswith("Only the owner can switch this group's model.")
        assert buttons(refused) == []
    assert picks(env) == []

    await process(runtime, group_text(412, "/model", USER))
    owners = as_shown(bot, FAMILY)
    assert buttons(owners)[1] == ("mini", "model:mini")
    await process(runtime, button_press(413, "model:mini", owners, MEMBER))

    assert [body.get("text") for body in methods(bot, "answerCallbackQuery")] == [
        "Only the owner can switch this group's model."
    ]
    assert methods(bot, "editMessageText") == [] and picks(env) == []

    await process(runtime, button_press(414, "model:mini", owners, USER))
    assert picks(env) == [{"provider": "telegram", "chat_id": str(GROUP), "preset": "mini"}]


async def test_a_press_for_a_preset_no_longer_configured_changes_nothing(runtime, bot, env):
    await process(runtime, private_text(420, "/model"))
    stale = as_shown(bot, PRIVATE)
    stale["reply_markup"]["inline_keyboard"].append([{"text": "gone", "callback_data": "model:gone"}])

    await process(runtime, button_press(421, "model:gone", stale, USER))

    assert [body.get("text") for body in methods(bot, "answerCallbackQuery")] == [
        "That preset is no longer configured; send /model for the current list."
    ]
    assert methods(bot, "editMessageText") == [] and picks(env) == []


async def test_without_presets_model_says_how_to_add_one(db_path, monkeypatch, ash_home, bot):
    configure(ash_home, monkeypatch, presets="")
    async with httpx.AsyncClient() as http:
        await process(make_runtime(http), private_text(430, "/model"))

    [answer] = bot.sent_to(USER)
    assert answer["text"].startswith("This chat uses the default model, anthropic claude-sonnet-4-6.")
    assert '[models.fast]\nprovider = "openai"\nmodel = "gpt-4o-mini"</code></pre>' in answer["text"]
    assert "without a restart" in answer["text"] and "restart Ash" not in answer["text"]
    assert buttons(answer) == []


async def test_the_pick_outlives_a_restart_and_the_next_turn_asks_the_picked_model(
    env, monkeypatch, bot, httpx2_mock, sleeps
):
    set_keys(monkeypatch)
    async with httpx.AsyncClient() as http:
        await process(make_runtime(http), private_text(440, "/model"))
        await process(make_runtime(http), button_press(441, "model:mini", as_shown(bot, PRIVATE), USER))
    route = httpx2_mock.post(OPENAI_CHAT).mock(
        return_value=sse_response("openai", "chat_stream_text_after_tool_result.sse")
    )

    async with httpx.AsyncClient() as http:
        restarted = make_runtime(http)

        async def agent(turn, sink):
            return await run_turn(restarted, turn, sink)

        await process(restarted, private_text(442, "Capital of the UK?"), runner=agent)

    assert request_json(route.calls.last)["model"] == "gpt-4o-mini"
    assert bot.sent_to(USER)[-1]["text"] == "The capital of the UK is London."


async def test_a_pick_whose_preset_was_removed_is_listed_as_the_default(runtime, bot, env, ash_home, monkeypatch):
    await process(runtime, private_text(450, "/model mini"))
    configure(ash_home, monkeypatch, presets='[models.haiku]\nprovider = "anthropic"\nmodel = "claude-haiku-4-5"\n')

    async with httpx.AsyncClient() as http:
        await process(make_runtime(http), private_text(451, "/model"))

    listing = bot.sent_to(USER)[-1]
    assert listing["text"].startswith(
        "This chat uses the default model, anthropic claude-sonnet-4-6. "
        "It had picked <code>mini</code>, which is no longer configured."
    )
    assert buttons(listing)[0] == ("✓ default", "model:default")


async def test_a_preset_whose_provider_has_no_key_is_refused_and_the_chat_keeps_its_model(bot, env, monkeypatch):
    """Switching to it would make the chat's next turn fail: the press says what to set instead."""
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    async with httpx.AsyncClient() as http:
        runtime = make_runtime(http)
        await process(runtime, private_text(460, "/model"))
        shown = as_shown(bot, PRIVATE)
        await process(runtime, button_press(461, "model:haiku", shown, USER))
        await process(runtime, private_text(462, "/model haiku"))
    [toast] = [body.get("text") for body in methods(bot, "answerCallbackQuery")]
    assert toast.startswith("haiku needs ANTHROPIC_API_KEY, which is not set. Add it to secrets.env")
    assert methods(bot, "editMessageText") == []  # the list and its buttons stay, to pick again
    assert bot.sent_to(USER)[-1]["text"].startswith("haiku needs ANTHROPIC_API_KEY")
    assert picks(env) == []
