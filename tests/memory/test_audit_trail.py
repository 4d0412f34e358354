"""The audit trail of memory: every kind of change is recorded with what caused it (extraction
from message N, the remember tool and who asked, the admin API, the CLI, gc), `ash memory
history ID` and `GET /admin/audit` show it, and it outlives a forgotten entry without its text:
the raw database file holds neither the entry nor a copy in the log."""

from __future__ import annotations

import json

from click.testing import CliRunner
from litestar.testing import TestClient

from lib.commands.cli import cli
from lib.db import Database
from lib.memory import audit, extraction, forget, gc, knowledge, store
from lib.tools.base import ToolContext
from lib.tools.memory_tools import Remember
from tests.memory.test_memory_surfaces_extraction import ScriptedModel, facts, later, turn
from tests.support.memory_retrieval import open_db
from tests.support.memory_surfaces import make_settings

ADMIN = "admin-token-for-audit-tests"


def trail(conn, memory_id: int) -> list[tuple[str, str]]:
    return [(e.action, e.actor) for e in audit.history(conn, memory_id)]


async def test_each_change_is_recorded_with_its_cause_and_forgetting_keeps_no_text(ash_home, monkeypatch):
    settings = make_settings(ash_home)
    conn = open_db(settings)
    db = Database(settings.database_path)
    session = store.open_session(conn, "telegram", "1", "1", "private")

    # Extraction from message N stores a fact; a later message contradicts it and supersedes it.
    first = turn(conn, settings, session, "I moved to Zanzibar last spring and I love the beaches there.")
    model = ScriptedModel()
    model.extract_answers.append(
        facts({"content": "The user lives in Zanzibar.", "subject": "home", "confidence": 0.9, "message_id": first})
    )
    [report] = await extraction.run_due(db, settings, model, now=later())
    [zanzibar] = report.stored
    second = turn(conn, settings, session, "Update: I left Zanzibar, I live in Quito now, up in the mountains.")
    model.extract_answers.append(
        facts({"content": "The user lives in Quito.", "subject": "home", "confidence": 0.9, "message_id": second})
    )
    model.check_answers.append(json.dumps({"supersedes": [zanzibar]}))
    [report] = await extraction.run_due(db, settings, model, now=later())
    [quito] = report.stored
    added = audit.history(conn, zanzibar)[0]
    assert (added.action, added.actor, added.detail["source_message_id"]) == ("memory_add", "extraction", first)
    superseded = next(e for e in audit.history(conn, quito) if e.action == "memory_supersede")
    assert superseded.detail["superseded"] == zanzibar and superseded.detail["by"] == quito
    assert superseded.detail["source_message_id"] == second

    # The remember tool, asked by user 1 in session S; saying it again reinforces it.
    tool = Remember()
    context = ToolContext(user_id="1", chat_id="1", session_id=session.id, settings=settings, db=db)
    for _ in range(2):
        result = await tool.execute(Remember.Input(content="Keeps a spare key with the neighbour Ottoline"), context)
    pinned = result.metadata["memory_id"]
    assert trail(conn, pinned) == [("memory_add", "tool:remember"), ("memory_reinforce", "tool:remember")]
    assert audit.history(conn, pinned)[1].detail["asked_by"] == "1"

    # The admin API and the CLI name themselves.
    monkeypatch.setenv("ASH_ADMIN_TOKEN", ADMIN)
    from app import app

    auth = {"authorization": f"Bearer {ADMIN}"}
    with TestClient(app) as client:
        made = client.post("/admin/memories", json={"content": "Prefers the window seat", "user_id": "1"}, headers=auth)
        by_admin = made.json()["id"]
    cli_run = CliRunner().invoke(cli, ["memory", "add", "Allergic to kiwi fruit", "--user", "1"])
    assert cli_run.exit_code == 0, cli_run.output
    by_cli = int(cli_run.output.split("#")[1])
    assert trail(conn, by_admin) == [("memory_add", "admin")]
    assert trail(conn, by_cli) == [("memory_add", "cli")]

    # Expiry by gc.
    fleeting = knowledge.add(conn, settings, "Parked on level 3", owner_user_id="1", expires_at="1m", source="cli")
    gc.collect(conn, settings, now="2999-01-01T00:00:00.000Z")
    assert trail(conn, fleeting)[-1] == ("memory_expire", "gc")

    # Forgetting the newest Quito fact deletes it and the Zanzibar version it replaced: both
    # histories stay, ids and causes only.
    assert forget.forget_memory(conn, settings, "1", quito, "cli") is not None
    assert [e.action for e in audit.history(conn, zanzibar)] == ["memory_add", "memory_supersede", "forget_memory"]
    log_text = json.dumps([e.detail for e in audit.entries(conn, limit=500)])
    assert "Zanzibar" not in log_text and "Quito" not in log_text

    history = CliRunner().invoke(cli, ["memory", "history", str(zanzibar)])
    assert history.exit_code == 0, history.output
    lines = history.output.splitlines()
    assert [line.split()[1] for line in lines] == ["memory_add", "memory_supersede", "forget_memory"]
    assert "extraction" in lines[0] and f'"source_message_id": {first}' in lines[0] and "cli" in lines[2]
    assert "Zanzibar" not in history.output
    assert CliRunner().invoke(cli, ["memory", "history", "999999"]).exit_code == 1

    with TestClient(app) as client:
        assert client.get("/admin/audit").status_code == 401
        page = client.get("/admin/audit", params={"memory_id": zanzibar}, headers=auth).json()
        assert [i["action"] for i in page["items"]] == ["forget_memory", "memory_supersede", "memory_add"]
        by_actor = client.get("/admin/audit", params={"actor": "tool"}, headers=auth).json()
        assert {i["actor"] for i in by_actor["items"]} == {"tool:remember"}
        paged = client.get("/admin/audit", params={"limit": 2}, headers=auth).json()
        older = client.get("/admin/audit", params={"before_id": paged["next_before_id"]}, headers=auth).json()
        assert older["items"][0]["id"] < paged["items"][-1]["id"]

    db.close()
    conn.close()
    raw = settings.database_path.read_bytes()
    for word in (b"Zanzibar.", b"The user lives in Quito"):
        assert word not in raw


def test_an_entry_id_is_never_given_again_so_its_history_stays_its_own(ash_home):
    settings = make_settings(ash_home)
    conn = open_db(settings)
    newest = knowledge.add(conn, settings, "Locker code is 4812", owner_user_id="1", source="cli")
    forget.forget_memory(conn, settings, "1", newest, "cli")
    # SQLite would hand the deleted highest id to the next row; the audit log names entries by id.
    after = knowledge.add(conn, settings, "Gym is on Tuesdays", owner_user_id="1", source="cli")
    assert after > newest
    assert trail(conn, newest) == [("memory_add", "cli"), ("forget_memory", "cli")]
    assert trail(conn, after) == [("memory_add", "cli")]
    conn.close()
