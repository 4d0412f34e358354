"""`ash restore PATH` while `ash serve` runs: the CLI finds the server on its port and the restore
goes through it (POST /admin/restore). A real granian server, a stub Bot API and model, real files.

After the backup, a person forgot themselves with /forget and an hourly reminder was sent; the
restored database has both from before: the person stays forgotten (their forget is applied again
and its audit record kept) and the reminder is neither sent a second time nor stopped: it waits for
its next time."""

from __future__ import annotations

import subprocess
import time

from lib.config import load_settings
from lib.db import connect
from lib.schedule import store
from lib.schedule.times import Timing
from tests.support.database import query
from tests.support.faults import ASH, OWNER, AshServer, Upstream, private_text, server_env, wait_until, write_config
from tests.support.telegram import button_press

PERSON = 5551
REMINDER = "⏰ water the plants"
HOUR = 3600


def _schedule_reminder(home, at: float) -> None:
    """An hourly reminder to the owner from `at`, stored as `ash schedule add` stores it."""
    settings = load_settings({"ASH_HOME": str(home)})
    timing = Timing("interval", at, "UTC", interval_seconds=HOUR)
    draft = store.Draft(
        user_id=str(OWNER), chat_id=str(OWNER), timing=timing, action=store.MESSAGE, text="water the plants"
    )
    conn = connect(home / "ash.db")
    try:
        store.create(conn, settings, draft, time.time())
    finally:
        conn.close()


def _forget_person(server: AshServer, upstream: Upstream) -> None:
    """/forget, then "Yes, forget me" under the question, as the person would."""
    assert server.post_update(private_text(20, "/forget", PERSON)).status_code == 200
    question = wait_until(lambda: [m for m in upstream.sent_to(PERSON) if "Are you sure" in m["text"]], 15, "/forget")
    message = {"message_id": max(upstream.messages), "chat": {"id": PERSON, "type": "private"}, "date": 0}
    message["text"] = question[0]["text"]
    assert server.post_update(button_press(21, f"forget:yes:{PERSON}", message, PERSON)).status_code == 200
    wait_until(lambda: any(m["text"].startswith("Done: I forgot") for m in upstream.sent_to(PERSON)), 15, "the forget")


def test_ash_restore_goes_through_the_running_server_and_forgetting_stays_real(tmp_path):
    home = tmp_path / "data"
    config = write_config(home, allowed=[OWNER, PERSON])
    with Upstream() as upstream:
        env = server_env(home, upstream)
        server = AshServer(home, env)
        # `ash restore` looks for the server at the configured port.
        config.write_text(config.read_text().replace("[server]\n", f"[server]\nport = {server.port}\n"))
        server.start()
        try:
            assert server.post_update(private_text(10, "My diagnosis came back: asthma", PERSON)).status_code == 200
            assert server.post_update(private_text(11, "I live in Lisbon")).status_code == 200
            wait_until(lambda: upstream.texts_to(PERSON) and upstream.texts_to(OWNER), 15, "both answers")
            # An exchange is stored just after its answer is sent: the backup must hold both.
            stored = "SELECT count(*) AS n FROM messages WHERE role = 'assistant'"
            wait_until(lambda: query(home / "ash.db", stored)[0]["n"] == 2, 15, "both exchanges stored")
            due = time.time() + 2.0
            _schedule_reminder(home, due)
            backup = tmp_path / "backup.db"
            subprocess.run([str(ASH), "backup", str(backup)], env=env, check=True, capture_output=True)
            assert time.time() < due, "the backup holds the reminder before it was sent"

            wait_until(lambda: REMINDER in upstream.texts_to(OWNER), 15, "the reminder")
            _forget_person(server, upstream)
            forgets = query(home / "ash.db", "SELECT * FROM audit_log WHERE action = 'forget_user'")
            assert [f["actor"] for f in forgets] == [f"telegram:{PERSON}"]

            done = subprocess.run(
                [str(ASH), "restore", str(backup), "--yes"], env=env, capture_output=True, text=True, timeout=60
            )
            assert done.returncode == 0, done.stdout + done.stderr
            assert "(through the running server)" in done.stdout
            assert "1 forget(s) applied again" in done.stdout
            assert "restore finished" in server.output(), "the server did the restore"

            db = home / "ash.db"
            words = " ".join(r["content"] for r in query(db, "SELECT content FROM messages"))
            assert "Lisbon" in words and "asthma" not in words
            assert query(db, "SELECT 1 FROM messages WHERE owner_user_id = ?", (str(PERSON),)) == []
            assert not any(b"asthma" in r["payload"] for r in query(db, "SELECT payload FROM inbox"))
            kept = query(db, "SELECT * FROM audit_log WHERE action = 'forget_user' AND actor != 'restore'")
            assert [{k: f[k] for k in ("created_at", "actor", "target", "detail")} for f in kept] == [
                {k: f[k] for k in ("created_at", "actor", "target", "detail")} for f in forgets
            ]

            # The server goes on answering; two ticks pass: the restored reminder was sent once and
            # waits for its next time (a catch-up run would collide with the carried inbox row of the
            # run already sent, and the scheduler would stop the task for good).
            assert server.post_update(private_text(30, "still there?")).status_code == 200
            wait_until(lambda: "Echo: still there?" in upstream.texts_to(OWNER), 15, "an answer after the restore")
            time.sleep(2.2)
            assert upstream.texts_to(OWNER).count(REMINDER) == 1, "no catch-up run of the restored reminder"
            task = query(db, "SELECT status, next_run_at FROM schedules")
            assert task == [{"status": "active", "next_run_at": due + HOUR}]
            assert "cannot be fired" not in server.output()
        finally:
            server.stop()
