"""Two real `ash serve` processes on one real SQLite file under concurrent, duplicated deliveries.

(SIGKILL mid-turn and restart is tests/test_telegram_e2e.py's test.)
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from lib.db import connect
from lib.migrations import migrate
from tests.support.database import query
from tests.support.faults import AshServer, Upstream, private_text, server_env, wait_until, write_config

pytestmark = pytest.mark.slow


def _migrated(home: Path) -> Path:
    path = home / "ash.db"
    conn = connect(path)
    migrate(conn)
    conn.close()
    return path


def test_two_servers_one_database_answer_every_update_once_in_chat_order(ash_home: Path):
    chats = [5000 + i for i in range(20)]
    write_config(ash_home, allowed=chats)
    db = _migrated(ash_home)
    per_chat = 10
    with Upstream(reply=lambda text: f"re: {text}") as upstream:
        servers = [AshServer(ash_home, server_env(ash_home, upstream), name=f"srv{i}") for i in range(2)]
        for server in servers:
            server.start(wait=False)
        try:
            for server in servers:
                server.wait_healthy()

            def deliver(index: int, chat: int) -> list[int]:
                statuses = []
                for k in range(per_chat):
                    update = private_text(100_000 + k * 100 + index, f"chat {chat} message {k}", user_id=chat)
                    # The same update to both processes at once: a duplicate delivery racing itself.
                    with ThreadPoolExecutor(2) as both:
                        sent = [both.submit(server.post_update, update) for server in servers]
                        statuses += [future.result().status_code for future in sent]
                return statuses

            with ThreadPoolExecutor(20) as pool:
                statuses = [s for chat_statuses in pool.map(deliver, range(20), chats) for s in chat_statuses]
            assert statuses == [200] * (2 * 20 * per_chat)

            def all_done() -> bool:
                left = query(db, "SELECT count(*) AS n FROM inbox WHERE status != 'done'")[0]["n"]
                return left == 0

            wait_until(all_done, timeout=240, what="every update to be answered")
        finally:
            for server in servers:
                server.stop()
        logs = "".join(server.output() for server in servers)

    assert query(db, "SELECT count(*) AS n FROM inbox")[0]["n"] == 20 * per_chat
    for chat in chats:
        expected = [f"re: chat {chat} message {k}" for k in range(per_chat)]
        assert upstream.texts_to(chat) == expected, f"chat {chat}"
    stored = query(db, "SELECT count(*) AS n FROM messages WHERE role = 'user'")[0]["n"]
    assert stored == 20 * per_chat
    # Both processes took part, and a lock never surfaced as a failure.
    assert upstream.count("sendMessage") == 20 * per_chat
    assert "database is locked" not in logs
