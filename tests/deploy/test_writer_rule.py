"""One writer: a second machine replays what writes to it (fly-replay) and runs no worker or scheduler."""

from __future__ import annotations

import json
import time

from lib.db import connect, now_iso
from lib.inbox import queue
from lib.migrations import migrate
from tests.support.database import inbox_status
from tests.support.faults import OWNER, AshServer, Upstream, private_text, server_env, wait_until, write_config
from tests.support.telegram import TOKEN

WRITER = '\n[replica]\nwriter = "m-writer"\n'
BOT_ID = int(TOKEN.split(":")[0])


def _pending_update(db, update_id: int) -> None:
    """An update waiting in a machine's own database (each Fly machine has its own volume)."""
    from lib.telegram.intake import parse

    body = json.dumps(private_text(update_id, "waiting")).encode()
    _, chat_key, kind, _ = parse(body)
    conn = connect(db)
    migrate(conn, db)
    conn.execute(queue.STORE_SQL, queue.store_params(BOT_ID, update_id, chat_key, kind, body, now_iso()))
    conn.close()


def test_a_machine_that_is_not_the_writer_replays_writes_and_runs_no_inbox_worker(tmp_path):
    with Upstream() as upstream:
        writer_home, other_home = tmp_path / "writer", tmp_path / "other"
        for home in (writer_home, other_home):
            write_config(home, allowed=[OWNER], extra=WRITER)
            _pending_update(home / "ash.db", 5)
        writer = AshServer(writer_home, server_env(writer_home, upstream, FLY_MACHINE_ID="m-writer"), name="w")
        other = AshServer(other_home, server_env(other_home, upstream, FLY_MACHINE_ID="m-other"), name="o")
        writer.start()
        other.start()
        try:
            answer = other.post_update(private_text(6, "hello"))
            assert answer.status_code == 503
            assert answer.headers["fly-replay"] == "instance=m-writer"
            for path in ("/admin/stats", "/admin/ui", "/mcp"):
                got = other.http.get(path, headers={"Authorization": "Bearer admin-token-for-tests"})
                assert got.headers.get("fly-replay") == "instance=m-writer", path
            assert other.http.post("/admin/tick").headers["fly-replay"] == "instance=m-writer"
            assert other.http.get("/healthz").status_code == 200  # reads are served where they land

            # The writer answers what waits in its database; the other machine leaves its own alone.
            wait_until(lambda: inbox_status(writer_home / "ash.db", 5) == "done", 30, "the writer's turn")
            time.sleep(2.5)  # more than two ticks (tick_interval = 1 s) and the scheduler's start
            assert inbox_status(other_home / "ash.db", 5) == "pending"
            assert inbox_status(other_home / "ash.db", 6) is None
            assert upstream.texts_to(OWNER) == ["Echo: waiting"]
            assert writer.post_update(private_text(6, "hello")).headers.get("fly-replay") is None
            assert "not the writer" in other.output()
        finally:
            writer.stop()
            other.stop()
