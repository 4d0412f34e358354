"""A group upgraded to a supergroup keeps everything it had, under its new id.

"Our team codeword is PELICAN", said in the group before the upgrade, was not in the prompt after
it: the group's memory, history, sessions and /model pick stayed on the old id (only scheduled
tasks moved). Through the real Telegram handler and agent turn (the model stubbed at the network edge,
the Bot API faked) over a real SQLite file, both ways Telegram says it, in either order, more
than once: the two service messages, and a 400 carrying `migrate_to_chat_id` mid-answer.
"""

from __future__ import annotations

import copy
import json
import time

import httpx
import pytest

from lib.db import rows
from lib.schedule import store as schedules
from lib.schedule.times import Timing
from lib.telegram.approvals import run_agent_turn
from lib.telegram.updates import telegram_worker
from tests.support.agent import ANTHROPIC_MESSAGES, SSE, set_keys
from tests.support.faults import anthropic_sse
from tests.support.telegram import deliver, make_runtime, point_at_fake_bot_api, private_text

ALICE = 408258968  # the owner; the sender of the recorded private text update
OLD = -4012345678  # the basic group
NEW = -1004012345678  # the supergroup it became
BOT = "el_mon_test_bot"
CONFIG = f"""owner = {ALICE}
[embeddings]
provider = "none"
[memory]
extraction_enabled = false
[models.fast]
provider = "anthropic"
model = "claude-haiku-4-5"
"""
# Bot API: the 400 Telegram answers a write to a group that became a supergroup
# (ResponseParameters.migrate_to_chat_id).
MIGRATED = {
    "ok": False,
    "error_code": 400,
    "description": "Bad Request: group chat was upgraded to a supergroup chat",
    "parameters": {"migrate_to_chat_id": NEW},
}


@pytest.fixture
def env(ash_home, db_path, monkeypatch, bot):
    point_at_fake_bot_api(monkeypatch, ash_home, CONFIG)
    set_keys(monkeypatch, openai=False)


def in_chat(update_id: int, text: str, chat_id: int, chat_type: str) -> dict:
    update = private_text(update_id, text, ALICE, username="alice")
    message = update["message"]
    message["chat"] = {"id": chat_id, "type": chat_type, "title": "Team"}
    entity = "mention" if text.startswith("@") else "bot_command"
    message["entities"] = [{"offset": 0, "length": len(text.split()[0]), "type": entity}]
    return update


def service(update_id: int, chat_id: int, chat_type: str, field: str, other: int) -> dict:
    """The service message Telegram sends in each chat of the upgrade (Message.migrate_*_chat_id)."""
    update = in_chat(update_id, "x", chat_id, chat_type)
    message = update["message"]
    for key in ("text", "entities"):
        del message[key]
    message[field] = other
    return update


class Model:
    """The Anthropic stub: answers every request, keeping what each one was sent."""

    def __init__(self, httpx2_mock):
        self.requests: list[dict] = []
        httpx2_mock.post(ANTHROPIC_MESSAGES).mock(side_effect=self._answer)

    def _answer(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(json.loads(request.content))
        return httpx.Response(200, content=b"".join(anthropic_sse("Noted.")), headers=SSE)


async def run(runtime, *updates: dict) -> None:
    deliver(runtime, *updates)
    worker = telegram_worker(runtime, runner=lambda turn, sink: run_agent_turn(runtime, turn, sink))
    await worker.drain()


def left_under(conn, chat_id: int) -> dict[str, int]:
    """What is still kept under a chat id."""
    owner = f"chat:{chat_id}"
    counts = {
        table: rows(conn, f"SELECT count(*) AS n FROM {table} WHERE owner_user_id = ?", (owner,))[0]["n"]
        for table in ("messages", "memories", "search_chunks")
    }
    for table in ("sessions", "chat_models", "schedules"):
        counts[table] = rows(conn, f"SELECT count(*) AS n FROM {table} WHERE chat_id = ?", (str(chat_id),))[0]["n"]
    return counts


def make_task(runtime, chat_id: int) -> None:
    conn = runtime.db.conn()
    timing = Timing("interval", time.time() + 3600, "UTC", interval_seconds=86400)
    draft = schedules.Draft(
        user_id=str(ALICE), chat_id=str(chat_id), chat_type="group", timing=timing, action=schedules.MESSAGE, text="x"
    )
    schedules.create(conn, runtime.settings, draft, time.time())


async def test_the_upgrade_messages_in_either_order_and_twice_move_everything(env, bot, httpx2_mock):
    model = Model(httpx2_mock)
    async with httpx.AsyncClient() as http:
        runtime = make_runtime(http)
        await run(runtime, in_chat(1, f"@{BOT} our team codeword is PELICAN", OLD, "group"))
        await run(runtime, in_chat(2, f"/model@{BOT} fast", OLD, "group"))
        make_task(runtime, OLD)

        # The new supergroup's message first, then the old group's, then a repeat of the first.
        moved_from = service(3, NEW, "supergroup", "migrate_from_chat_id", OLD)
        moved_to = service(4, OLD, "group", "migrate_to_chat_id", NEW)
        again = copy.deepcopy(moved_from)
        again["update_id"] = 5
        await run(runtime, moved_from, moved_to, again)

        await run(runtime, in_chat(6, f"@{BOT} what is our codeword?", NEW, "supergroup"))
        conn = runtime.db.conn()
        assert left_under(conn, OLD) == dict.fromkeys(left_under(conn, OLD), 0)
        kept = left_under(conn, NEW)
        assert kept["messages"] == 4 and kept["sessions"] == 1 and kept["chat_models"] == 1 and kept["schedules"] == 1
        audits = rows(conn, "SELECT target, detail FROM audit_log WHERE action = 'chat_migrated'")
        runtime.db.close()

    asked = model.requests[-1]
    assert "PELICAN" in json.dumps(asked["messages"])  # the group's history, before the upgrade
    assert asked["model"] == "claude-haiku-4-5"  # the /model pick
    assert len(audits) == 1 and audits[0]["target"] == str(NEW)  # moved once, however often told
    assert bot.sent_to(NEW)[-1]["text"] == "Noted."


async def test_a_400_saying_the_group_moved_mid_answer_moves_it_and_the_answer(env, bot, httpx2_mock):
    Model(httpx2_mock)
    async with httpx.AsyncClient() as http:
        runtime = make_runtime(http)
        await run(runtime, in_chat(1, f"@{BOT} our team codeword is PELICAN", OLD, "group"))
        bot.fail["sendMessage"] = [(400, MIGRATED)]
        await run(runtime, in_chat(2, f"@{BOT} and the meeting is on Friday", OLD, "group"))
        conn = runtime.db.conn()
        left, kept = left_under(conn, OLD), left_under(conn, NEW)
        runtime.db.close()

    assert left == dict.fromkeys(left, 0), "something stayed under the old id"
    assert kept["messages"] == 4  # both exchanges, the one answered across the move too
    assert [m["text"] for m in bot.sent_to(NEW)] == ["Noted."]
