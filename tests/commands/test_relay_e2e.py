"""End to end: `ash relay` and a real `ash serve` (granian), both as processes, against a loopback
Bot API serving getUpdates and a stub Anthropic. The server is SIGKILLed once the first 20 updates
are stored and a turn is stopped mid-answer in every chat slot, and restarted while the relay
retries the first update of the second half; one update the webhook refuses with 400 sits among
the rest. Every good update is answered exactly once: one message each, the resumed turns editing
the message they had started."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading

import pytest

from tests.support.bot_api import PollingBotAPI
from tests.support.database import inbox_statuses, query
from tests.support.faults import ASH, AshServer, private_text, server_env, wait_until, write_config

pytestmark = pytest.mark.slow

PEOPLE = [6_100_000 + n for n in range(50)]
FIRST_ID = 800_000
REFUSED_ID = FIRST_ID + 35  # among the second half: it must not hold up the updates after it
CHAT_SLOTS = 8  # telegram.max_concurrent_chats: turns running at once
STREAMING_SQL = "SELECT count(*) AS n FROM inbox WHERE reply_message_id IS NOT NULL AND status != 'done'"


def update_for(n: int) -> dict:
    update_id = FIRST_ID + n if n < 35 else FIRST_ID + n + 1
    return private_text(update_id, f"hello {n}", user_id=PEOPLE[n])


def refused_update() -> tuple[int, bytes]:
    """A well-formed update whose text is not valid UTF-8: the webhook answers 400 for it."""
    body = json.dumps(private_text(REFUSED_ID, "PLACEHOLDER", user_id=PEOPLE[0])).encode()
    return REFUSED_ID, body.replace(b"PLACEHOLDER", b"\xff\xfe")


def streaming(db) -> int:
    """Turns that sent their first message and stored its id, and have not finished."""
    return query(db, STREAMING_SQL)[0]["n"]


def answered_once(api: PollingBotAPI) -> bool:
    return all([m["text"] for m in api.sent_to(person)] == [f"Echo: hello {n}"] for n, person in enumerate(PEOPLE))


def test_relay_delivers_every_update_once_across_a_server_kill_and_skips_a_refused_one(tmp_path):
    home = tmp_path / "home"
    write_config(home, allowed=PEOPLE)
    db = home / "ash.db"
    with PollingBotAPI() as api:
        api.hold_anthropic = threading.Event()
        env = server_env(home, api)
        server = AshServer(home, env).start()
        relay_log = tmp_path / "relay.log"
        with relay_log.open("wb") as log:
            relay = subprocess.Popen(
                [str(ASH), "relay"],
                env={**env, "PORT": str(server.port)},  # the default URL: this machine's server
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            api.queue(*[update_for(n) for n in range(20)])
            wait_until(lambda: len(inbox_statuses(db)) == 20, 30, "the first 20 updates stored")
            # Every chat slot holds a turn stopped mid-answer, its first message sent and its id stored.
            wait_until(lambda: streaming(db) == CHAT_SLOTS, 30, "turns pinned mid-answer")
            server.kill()

            second_half = [update_for(n) for n in range(20, 50)]
            api.queue(*second_half[:15], refused_update(), *second_half[15:])
            wait_until(lambda: "webhook unreachable" in relay_log.read_text(), 30, "the relay to retry a delivery")
            api.hold_anthropic.set()
            server.start()

            wait_until(lambda: answered_once(api), 60, "each of the 50 updates answered")
            done = {update_for(n)["update_id"]: "done" for n in range(50)}
            wait_until(lambda: inbox_statuses(db) == done, 30, "every stored update done")
            last = FIRST_ID + 50
            wait_until(lambda: api.confirmed_up_to() > last, 30, "the relay to move past the last update")
        finally:
            if relay.poll() is None:
                os.killpg(relay.pid, signal.SIGTERM)
                relay.wait(10)
            server.stop()

        assert REFUSED_ID not in inbox_statuses(db)
        assert f"update {REFUSED_ID} refused by the webhook with 400, skipped" in relay_log.read_text()
        for n, person in enumerate(PEOPLE):  # nothing was sent twice, nor edited into another answer
            assert [m["text"] for m in api.sent_to(person)] == [f"Echo: hello {n}"], n
