"""The other ways to reach scheduled tasks: `ash schedule list|add|cancel`, `GET /admin/schedules` and
`DELETE /admin/schedules/{id}`; and the ways they go away: /forget and taking someone's access away."""

from __future__ import annotations

from click.testing import CliRunner
from litestar.testing import TestClient

from lib.commands.cli import cli
from lib.conversation.commands import FORGET_YES, run_press
from lib.conversation.replies import Asker
from lib.db import connect
from lib.memory import store as memory_store
from lib.schedule import store
from tests.schedule.conftest import MEMBER, OWNER, START, add_job
from tests.support.database import query

ADMIN = "admin-token-for-tests"
AUTH = {"Authorization": f"Bearer {ADMIN}"}


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_ash_schedule_add_list_cancel(env):
    conn = connect(env)
    memory_store.set_timezone(conn, str(OWNER), "Europe/Lisbon")
    conn.close()

    added = run("schedule", "add", "--cron", "0 8 * * *", "--prompt", "summarise the weather in Lisbon")
    assert added.exit_code == 0, added.output
    assert added.output.startswith(
        'scheduled #1 on the schedule `0 8 * * *` (Europe/Lisbon), runs the prompt "summarise the weather in Lisbon"'
    )
    assert "a running server picks it up within [server] tick_interval (15 s)" in added.output
    member = run("schedule", "add", "--at", "in 30 hours", "--user", str(MEMBER), "--topic", "4", "stand up")
    assert member.exit_code == 0, member.output

    listed = run("schedule", "list")
    assert listed.exit_code == 0
    lines = listed.output.splitlines()
    # The next to run first: the daily one is due within a day, the other in 30 hours.
    assert len(lines) == 2 and lines[0].startswith("#1 ") and f"(user {MEMBER}, chat {MEMBER})" in lines[1]
    assert run("schedule", "list", "--user", str(MEMBER)).output.count("\n") == 1

    cancelled = run("schedule", "cancel", "1")
    assert cancelled.output == 'cancelled #1, which runs the prompt "summarise the weather in Lisbon"\n'
    again = run("schedule", "cancel", "1")
    assert again.exit_code == 1 and "there is no active scheduled task #1" in again.output
    assert "#1 " not in run("schedule", "list").output
    assert "cancelled" in run("schedule", "list", "--all").output
    assert query(env, "SELECT message_thread_id FROM schedules WHERE id = 2") == [{"message_thread_id": 4}]


def test_ash_schedule_add_says_what_is_wrong(env):
    past = run("schedule", "add", "--at", "2020-01-01T09:00", "hi")
    assert past.exit_code == 1 and "is in the past" in past.output
    zone = run("schedule", "add", "--at", "in 1 hour", "--zone", "Nowhere/Land", "hi")
    assert zone.exit_code == 1 and "There is no time zone called 'Nowhere/Land'" in zone.output
    assert query(env, "SELECT count(*) AS n FROM schedules") == [{"n": 0}]


def test_admin_lists_and_cancels_tasks(env, runtime, clock, monkeypatch):
    monkeypatch.setenv("ASH_ADMIN_TOKEN", ADMIN)
    first = add_job(runtime, clock(), every="1 hour", text="hourly", timezone="Europe/Lisbon")
    add_job(runtime, clock(), at="in 2 hours", text="member's", user=MEMBER, chat=MEMBER)
    from app import app

    with TestClient(app=app) as client:
        assert client.get("/admin/schedules").status_code == 401
        listed = client.get("/admin/schedules", headers=AUTH).json()
        assert listed["count"] == 2
        item = listed["items"][0]
        assert {k: item[k] for k in ("id", "kind", "when", "timezone", "action", "text", "status")} == {
            "id": first.id,
            "kind": "interval",
            "when": "every 1 hour",
            "timezone": "Europe/Lisbon",
            "action": "message",
            "text": "hourly",
            "status": "active",
        }
        assert item["next_run_at"] == "2026-03-27T11:00:00.000Z"
        only = client.get("/admin/schedules", params={"user_id": str(MEMBER)}, headers=AUTH).json()
        assert [i["text"] for i in only["items"]] == ["member's"]

        cancelled = client.delete(f"/admin/schedules/{first.id}", headers=AUTH)
        assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
        assert client.delete(f"/admin/schedules/{first.id}", headers=AUTH).status_code == 409
        assert client.delete("/admin/schedules/999", headers=AUTH).status_code == 404
        assert client.get("/admin/schedules", headers=AUTH).json()["count"] == 1
        everything = client.get("/admin/schedules", params={"include_finished": "true"}, headers=AUTH).json()
        assert everything["count"] == 2
    assert query(env, "SELECT actor, action, target FROM audit_log WHERE action = 'schedule_cancel'") == [
        {"actor": "admin", "action": "schedule_cancel", "target": str(first.id)}
    ]


def test_forget_removes_the_persons_tasks_and_only_theirs(env, runtime, clock):
    mine = add_job(runtime, clock(), every="1 hour", text="mine", user=MEMBER, chat=MEMBER)
    theirs = add_job(runtime, clock(), every="1 hour", text="the owner's")
    conn = connect(env)
    try:
        asker = Asker("telegram", str(MEMBER), str(MEMBER))
        done = run_press(conn, runtime.settings, asker, f"{FORGET_YES}{MEMBER}")
        assert (done.notice, done.reply.text.startswith("Done: I forgot everything about you")) == ("Done.", True)
        assert store.get(conn, mine.id) is None
        assert store.get(conn, theirs.id) is not None
    finally:
        conn.close()
    [audit] = query(env, "SELECT detail FROM audit_log WHERE action = 'forget_user'")
    assert '"schedules": 1' in audit["detail"]


def test_taking_access_away_removes_the_persons_tasks(env, runtime, clock):
    add_job(runtime, clock(), every="1 hour", text="member's", user=MEMBER, chat=MEMBER)
    add_job(runtime, clock(), at="in 1 hour", text="in the group", user=MEMBER, chat=-100123, chat_type="supergroup")
    kept = add_job(runtime, clock(), every="1 hour", text="the owner's")

    denied = run("users", "deny", str(MEMBER))

    assert denied.exit_code == 0, denied.output
    assert "removed the 2 scheduled task(s) they had made" in denied.output
    assert query(env, "SELECT id FROM schedules") == [{"id": kept.id}]


async def test_admin_tick_fires_what_is_due(db_path, monkeypatch):
    from litestar.testing import AsyncTestClient

    from app import app
    from lib.inbox.scheduler import Scheduler

    monkeypatch.setenv("ASH_ADMIN_TOKEN", ADMIN)
    async with AsyncTestClient(app) as client:
        runtime, services = app.state.runtime, app.state.services
        assert services.scheduler is None and services.scheduler_start is None
        job = add_job(runtime, START, at="in 1 minute", text="due")
        # No bot token here, so the lifespan started no scheduler: this one's clock says it is due.
        services.scheduler = Scheduler(
            runtime.db, runtime.settings, 0, wake=services.inbox_worker.kick, clock=lambda: START + 60
        )
        ticked = await client.post("/admin/tick", headers=AUTH)
        again = await client.post("/admin/tick", headers=AUTH)
    assert ticked.json()["scheduled"] == 1 and again.json()["scheduled"] == 0
    assert ticked.json()["inbox"] == {"pending": 1}
    assert query(db_path, "SELECT kind, chat_key FROM inbox") == [{"kind": "scheduled", "chat_key": str(OWNER)}]
    assert query(db_path, "SELECT status FROM schedules WHERE id = ?", (job.id,)) == [{"status": "done"}]
