"""A follow-up through real `ash serve` (granian) processes, a stub Bot API and a stub model: the
server SIGKILLed while the check-in is being sent, restarted: the person gets it exactly once."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from lib.db import connect, iso
from lib.migrations import migrate
from lib.schedule import followups
from tests.support.database import query
from tests.support.faults import OWNER, AshServer, Upstream, server_env, wait_until, write_config

pytestmark = pytest.mark.slow

CHECK_IN = "How did the job interview go?"
# No quiet hours (a start equal to its end): the test runs at whatever time of day it is.
NO_QUIET = '\n[followups]\nquiet_hours = "00:00-00:00"\n'


def followup_due(home: Path, at: float) -> None:
    """Follow-ups on for the owner and one waiting, due at `at`, as another process would store it."""
    path = home / "ash.db"
    conn = connect(path)
    try:
        migrate(conn)
        now = time.time()
        followups.set_enabled(conn, str(OWNER), True, "test", now)
        conn.execute(
            followups.INSERT_SQL,
            {
                "user_id": str(OWNER),
                "chat_id": str(OWNER),
                "chat_type": "private",
                "thread": None,
                "topic": None,
                "at": at,
                "timezone": "UTC",
                "action": "prompt",
                "text": "job interview",
                "event_at": at - 7200,
                "now": iso(now),
            },
        )
    finally:
        conn.close()


def test_sigkill_while_a_check_in_is_sent_then_restart_sends_it_exactly_once(ash_home: Path):
    write_config(ash_home, extra=NO_QUIET)
    with Upstream(reply=lambda text: CHECK_IN) as upstream:
        sends = Counter()

        def first_send(body: dict) -> bool:
            sends[str(body["chat_id"])] += 1
            return sends[str(body["chat_id"])] == 1

        upstream.swallow = first_send  # Telegram never answers the first send: the server dies in it
        env = server_env(ash_home, upstream)
        followup_due(ash_home, time.time() + 2.0)
        server = AshServer(ash_home, env, name="first").start()
        try:
            assert upstream.swallowed.wait(20), "the check-in was never sent"
        finally:
            server.kill()
        restarted = AshServer(ash_home, env, name="restarted").start()
        try:
            wait_until(lambda: CHECK_IN in upstream.texts_to(OWNER), timeout=20, what="the check-in")
            time.sleep(1.5)  # a second copy would come now
        finally:
            restarted.stop()
        texts = upstream.texts_to(OWNER)
        model_calls = upstream.count("anthropic")
    assert texts == [CHECK_IN]
    assert model_calls <= 2  # the killed run's, and at most one for the resumed run
    db = ash_home / "ash.db"
    assert query(db, "SELECT outcome FROM schedule_runs") == [{"outcome": "sent"}]
    assert query(db, "SELECT unanswered FROM followup_people") == [{"unanswered": 1}]
    assert {r["status"] for r in query(db, "SELECT status FROM inbox")} == {"done"}
