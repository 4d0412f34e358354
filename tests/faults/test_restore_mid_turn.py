"""A turn interrupted after its answer was shown is not answered again: through a real `ash
serve`, a restore (`POST /admin/restore`) or a SIGKILL lands after Telegram showed the complete
answer and before the update was marked done. The next run used to ask the model again and
stream the new answer over the complete one ("Answer…" back to a cursor, then the whole answer
again; with a real model, a different answer). Found by the soak (tests/faults/test_soak.py).

The reported case (10 chats, a slow first turn and two more messages each, delivered as Telegram
delivers them, a restore from an earlier backup while the first turns stream) is kept as the
fault it survives: every update answered exactly once.
"""

from __future__ import annotations

import threading
import time

import pytest

from tests.support.database import inbox_status, query
from tests.support.faults import (
    OWNER,
    AshServer,
    Late,
    Slow,
    Upstream,
    private_text,
    server_env,
    wait_until,
    write_config,
)

pytestmark = pytest.mark.slow

ADMIN = {"Authorization": "Bearer admin-token-for-tests"}
CHATS = [7100 + i for i in range(10)]


def _deliver(server: AshServer, update: dict) -> None:
    """As Telegram does: the same update again until it is answered 200."""
    while server.post_update(update).status_code != 200:
        time.sleep(0.1)


def _unchanged_once_complete(message: dict) -> bool:
    history = message["history"]
    return history[history.index(message["text"]) :] == [message["text"]]


def _late_final_edit(upstream: Upstream, final: str) -> threading.Event:
    """Telegram shows the final edit at once and answers it 30 s late; the event is set then."""
    shown = threading.Event()

    def decide(key: str, body: dict):
        if key == "editMessageText" and body.get("text") == final and not shown.is_set():
            shown.set()
            return Late(30)
        return None

    upstream.decide = decide
    return shown


@pytest.mark.parametrize("interruption", ["restore", "sigkill"])
def test_an_answer_shown_complete_is_not_answered_again_after_an_interruption(tmp_path, interruption):
    home = tmp_path / "data"
    write_config(home, allowed=[OWNER])
    final = "Echo: what is the capital of Portugal"
    with Upstream() as upstream:
        env = server_env(home, upstream)
        server = AshServer(home, env).start()
        try:
            backup = tmp_path / "earlier.db"
            backup.write_bytes(server.http.post("/admin/backup", headers=ADMIN).content)
            shown = _late_final_edit(upstream, final)
            assert server.post_update(private_text(501, "what is the capital of Portugal")).status_code == 200
            assert shown.wait(60), "the final answer was never shown"
            if interruption == "restore":
                answer = server.http.post("/admin/restore", json={"path": str(backup)}, headers=ADMIN, timeout=90)
                assert answer.status_code == 200, answer.text
            else:
                server.kill()
                server = AshServer(home, env, port=server.port).start()
            wait_until(lambda: inbox_status(home / "ash.db", 501) == "done", 60, "the update to be finished")
            time.sleep(1.5)  # a second run would show itself within a tick or two
        finally:
            server.stop()
    [message] = upstream.sent_to(OWNER)
    assert message["text"] == final
    assert _unchanged_once_complete(message), message["history"]
    assert upstream.count("anthropic") == 1, "the model was asked again"


def test_restore_while_slow_turns_stream_answers_every_update_exactly_once(tmp_path):
    home = tmp_path / "data"
    write_config(home, allowed=CHATS)
    with Upstream() as upstream:
        # The first message of every chat is answered slowly: its turn is mid-stream for seconds.
        upstream.decide = lambda key, body: Slow(4.0) if key == "anthropic" and "slow" in str(body) else None
        server = AshServer(home, server_env(home, upstream)).start()
        try:
            backup = tmp_path / "earlier.db"
            taken = server.http.post("/admin/backup", headers=ADMIN)
            assert taken.status_code == 200, taken.text
            backup.write_bytes(taken.content)

            def chat(index: int, chat_id: int) -> None:
                base = 10_000 + index * 10
                _deliver(server, private_text(base + 1, f"slow question {chat_id}", chat_id))
                for k in (2, 3):
                    time.sleep(0.2)
                    _deliver(server, private_text(base + k, f"message {k} of {chat_id}", chat_id))

            senders = [threading.Thread(target=chat, args=pair) for pair in enumerate(CHATS)]
            for sender in senders:
                sender.start()
            # Every chat's first answer has started streaming into a message.
            wait_until(lambda: all(upstream.sent_to(c) for c in CHATS), 60, "every first answer to start")
            restored = server.http.post("/admin/restore", json={"path": str(backup)}, headers=ADMIN, timeout=90)
            assert restored.status_code == 200, restored.text
            for sender in senders:
                sender.join(60)

            ids = [10_000 + i * 10 + k for i in range(len(CHATS)) for k in (1, 2, 3)]

            def all_done() -> bool:
                found = query(home / "ash.db", "SELECT update_id, status FROM inbox WHERE update_id >= 10000")
                return {r["update_id"]: r["status"] for r in found} == dict.fromkeys(ids, "done")

            wait_until(all_done, 120, "every update to be answered")
            time.sleep(1.5)  # a second answer would come within a tick or two
        finally:
            server.stop()

    for chat_id in CHATS:
        wanted = [f"Echo: slow question {chat_id}", f"Echo: message 2 of {chat_id}", f"Echo: message 3 of {chat_id}"]
        messages = upstream.sent_to(chat_id)
        assert [m["text"] for m in messages] == wanted, f"chat {chat_id}: {[m['history'] for m in messages]}"
        assert all(_unchanged_once_complete(m) for m in messages), [m["history"] for m in messages]
