"""Scheduled tasks through real `ash serve` (granian) processes, a stub Bot API and a stub model:

- a turn in which the model calls `schedule` for "in 2 seconds", and the reminder arriving two
  seconds later in the forum topic it was asked in;
- the server SIGKILLed while a due reminder is being sent (and another falls due while it is
  down), restarted: each reminder reaches the chat exactly once;
- two servers on one database, 100 tasks due at the same moment: each sent exactly once.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from lib.db import connect
from lib.migrations import migrate
from lib.schedule import store
from lib.schedule.times import Timing
from tests.support.database import query
from tests.support.faults import (
    OWNER,
    AshServer,
    Upstream,
    anthropic_tool_use,
    server_env,
    wait_until,
    write_config,
)
from tests.support.telegram import forum_topic_text, person

pytestmark = pytest.mark.slow

FORUM, TOPIC = -1001971186208, 2391  # the recorded forum topic (update_message_forum_topic_edited.json)


def migrated(home: Path) -> Path:
    path = home / "ash.db"
    conn = connect(path)
    migrate(conn)
    conn.close()
    return path


def schedule_reminders(db: Path, settings_home: Path, due: dict[str, tuple[int, float]]) -> None:
    """Store one-time reminders as another process would (`ash schedule add`): text -> (chat, when)."""
    from lib.config import load_settings

    settings = load_settings({"ASH_HOME": str(settings_home)})
    conn = connect(db)
    try:
        now = time.time()
        for text, (chat, at) in due.items():
            timing = Timing("once", at, "UTC")
            draft = store.Draft(user_id=str(chat), chat_id=str(chat), timing=timing, action=store.MESSAGE, text=text)
            store.create(conn, settings, draft, now)
    finally:
        conn.close()


def test_the_model_schedules_in_2_seconds_and_the_reminder_lands_in_the_topic_2_seconds_later(ash_home: Path):
    config = write_config(ash_home)
    # A tick far away: only the tool telling the scheduler can fire the reminder on time.
    config.write_text(config.read_text().replace("tick_interval = 1.0", "tick_interval = 60.0"))
    db = migrated(ash_home)
    asked = forum_topic_text(900_001, "@el_mon_test_bot remind me in 2 seconds to stretch", person(OWNER, "Ann"))
    with Upstream(reply=lambda text: "I'll remind you in 2 seconds.") as upstream:
        upstream.anthropic_script = [anthropic_tool_use("schedule", {"at": "in 2 seconds", "message": "stretch"})]
        server = AshServer(ash_home, server_env(ash_home, upstream)).start()
        try:
            posted = time.time()
            assert server.post_update(asked).status_code == 200
            reminder = wait_until(
                lambda: next((m for m in upstream.sent_to(FORUM) if m["text"] == "⏰ stretch"), None),
                timeout=15,
                what="the reminder",
            )
        finally:
            server.stop()
    answer = next(m for m in upstream.sent_to(FORUM) if m["text"] == "I'll remind you in 2 seconds.")
    assert (reminder["chat_id"], reminder["message_thread_id"]) == (FORUM, TOPIC)
    assert answer["message_thread_id"] == TOPIC
    [job] = query(db, "SELECT starts_at, chat_id, message_thread_id, user_id FROM schedules")
    assert (job["chat_id"], job["message_thread_id"], job["user_id"]) == (str(FORUM), TOPIC, str(OWNER))
    # Two seconds after the tool made it, within the second the timer promises.
    assert reminder["sent_at"] - posted >= 2.0
    assert 0.0 <= reminder["sent_at"] - job["starts_at"] < 1.0
    assert [m["text"] for m in upstream.sent_to(FORUM)].count("⏰ stretch") == 1


def test_sigkill_while_a_reminder_is_due_then_restart_sends_each_exactly_once(ash_home: Path):
    write_config(ash_home)
    db = migrated(ash_home)
    with Upstream() as upstream:
        # Telegram never gets the first attempt at "⏰ first": the server dies while sending it.
        attempts = Counter()

        def first_attempt(body: dict) -> bool:
            attempts[body["text"]] += 1
            return body["text"] == "⏰ first" and attempts[body["text"]] == 1

        upstream.swallow = first_attempt
        env = server_env(ash_home, upstream)
        server = AshServer(ash_home, env, name="first").start()
        soon = time.time() + 2.0
        schedule_reminders(db, ash_home, {"first": (OWNER, soon), "second": (OWNER, soon + 2.5)})
        try:
            assert upstream.swallowed.wait(15), "the first reminder was never sent"
        finally:
            server.kill()
        # The second falls due while nothing runs.
        wait_until(lambda: time.time() > soon + 3.0, timeout=10, what="the second reminder's time")
        restarted = AshServer(ash_home, env, name="restarted").start()
        try:
            wait_until(lambda: len(upstream.texts_to(OWNER)) >= 2, timeout=20, what="both reminders")
            time.sleep(1.5)  # a second copy would come now
        finally:
            restarted.stop()
        texts = upstream.texts_to(OWNER)
    assert sorted(texts) == ["⏰ first", "⏰ second"]
    assert attempts["⏰ first"] == 2  # the lost attempt, and the resumed one
    assert query(db, "SELECT count(*) AS n FROM schedule_runs") == [{"n": 2}]
    assert {r["status"] for r in query(db, "SELECT status FROM inbox")} == {"done"}


def test_two_servers_on_one_database_send_each_of_100_tasks_due_at_once_exactly_once(ash_home: Path):
    chats = [7000 + i for i in range(10)]
    write_config(ash_home, allowed=chats)
    db = migrated(ash_home)
    with Upstream() as upstream:
        servers = [AshServer(ash_home, server_env(ash_home, upstream), name=f"srv{i}") for i in range(2)]
        for server in servers:
            server.start(wait=False)
        try:
            for server in servers:
                server.wait_healthy()
            due = time.time() + 3.0  # both servers' ticks (1 s here) see them and arm their timers
            schedule_reminders(db, ash_home, {f"task {i}": (chats[i % 10], due) for i in range(100)})

            def all_sent() -> bool:
                return sum(len(upstream.texts_to(chat)) for chat in chats) >= 100

            wait_until(all_sent, timeout=60, what="100 reminders")
            time.sleep(1.5)  # a duplicate would come now
        finally:
            for server in servers:
                server.stop()
        logs = "".join(server.output() for server in servers)
        sent = Counter(text for chat in chats for text in upstream.texts_to(chat))
    assert sent == Counter({f"⏰ task {i}": 1 for i in range(100)})
    for i in range(100):
        assert f"⏰ task {i}" in upstream.texts_to(chats[i % 10])
    assert query(db, "SELECT count(*) AS n FROM schedule_runs") == [{"n": 100}]
    assert "database is locked" not in logs
