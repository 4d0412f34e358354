"""Closing the database at shutdown closes every thread's connection, so the last close folds the
WAL into the file (a server worker ends with os._exit: nothing else would close them)."""

from __future__ import annotations

import threading
import time

from lib.db import Database, connect
from lib.migrations import migrate

# Counts to two million in SQLite: long enough to still be running when close() is called.
SLOW_SQL = """
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2000000) SELECT count(*) FROM c
"""


def test_close_closes_every_threads_connection_and_leaves_no_wal(tmp_path):
    path = tmp_path / "ash.db"
    conn = connect(path)
    migrate(conn)
    conn.close()
    db = Database(path)

    def write(n: int) -> None:
        db.conn().execute("INSERT INTO meta (key, value) VALUES (?, 'x')", (f"thread-{n}",))

    workers = [threading.Thread(target=write, args=(n,)) for n in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    db.conn().execute("SELECT 1")
    assert path.with_name("ash.db-wal").exists()

    db.close()
    assert not path.with_name("ash.db-wal").exists() and not path.with_name("ash.db-shm").exists()
    # Used again after close, a thread gets a new connection.
    assert db.conn().execute("SELECT count(*) FROM meta WHERE key LIKE 'thread-%'").fetchone() == (3,)
    db.close()


def test_close_waits_for_a_statement_still_running_in_another_thread(tmp_path):
    db = Database(tmp_path / "ash.db")
    counted: list[int] = []
    started = threading.Event()

    def slow() -> None:
        conn = db.conn()
        started.set()
        counted.append(conn.execute(SLOW_SQL).fetchone()[0])

    worker = threading.Thread(target=slow)
    worker.start()
    started.wait()
    time.sleep(0.05)  # inside the statement now
    db.close()  # apsw refuses to close under a running statement: close waits for it
    worker.join()
    assert counted == [2_000_000]
    assert not (tmp_path / "ash.db-wal").exists()
