"""/forget while Litestream replicates: it returns at once, and the replica's latest state has
nothing of what was forgotten. Litestream keeps a read transaction open on the database, so the
forget's `wal_checkpoint(TRUNCATE)` used to wait the whole 10 s busy timeout and give up."""

from __future__ import annotations

import os
import subprocess
import time

from lib.config import load_settings
from lib.memory import knowledge
from lib.memory.forget import forget_user
from lib.replica.litestream import binary, clean_output, litestream_env, position, restore
from lib.replica.target import replica_of
from lib.replica.target import write_config as write_litestream_config
from tests.deploy.conftest import CREDENTIALS, config_extra
from tests.support.database import query
from tests.support.faults import wait_until, write_config
from tests.support.memory_retrieval import open_db
from tests.support.memory_surfaces import say

PERSON = "5150"
SECRET = "lighthouse-4921"


def test_a_forget_returns_at_once_while_litestream_replicates(tmp_path, s3_endpoint, bucket):
    home = tmp_path / "data"
    write_config(home, extra=config_extra(s3_endpoint))
    settings = load_settings({"ASH_HOME": str(home), "ASH_REPLICA_URL": f"s3://{bucket}/ash"})
    replica = replica_of(settings)
    environ = {**os.environ, **CREDENTIALS}
    conn = open_db(settings)
    said, _ = say(conn, settings, PERSON, f"my door code is {SECRET}", "Noted.")
    knowledge.add(conn, settings, f"door code is {SECRET}", owner_user_id=PERSON, source_message_id=said)
    config = write_litestream_config(replica, home)
    litestream = subprocess.Popen(
        [binary(), "replicate", "-config", str(config), "-no-expand-env"],
        env=litestream_env(replica, environ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # Once Litestream has read the database it holds its read transaction.
        wait_until(lambda: position(replica, environ, home).local_txid, 30, "Litestream to read the database")
        started = time.perf_counter()
        counts = forget_user(conn, settings, PERSON, actor=f"telegram:{PERSON}")
        took = time.perf_counter() - started
        assert counts["messages"] == 2 and counts["memories"] == 1
        assert took < 1.0, f"the forget took {took:.1f} s"

        # The forget reaches the replica like any write: its latest state holds none of it.
        time.sleep(1.2)  # Litestream reads the WAL once a second
        local = wait_until(lambda: position(replica, environ, home).local_txid, 30, "Litestream to read the forget")
        wait_until(lambda: (position(replica, environ, home).replica_txid or 0) >= local, 30, "the replica")
        copy = tmp_path / "from-replica.db"
        try:
            assert restore(replica, copy, environ, home)
            assert query(copy, "SELECT id FROM messages WHERE owner_user_id = ?", (PERSON,)) == []
            assert SECRET.encode() not in copy.read_bytes()
        finally:
            clean_output(copy)
    finally:
        litestream.terminate()
        litestream.wait(10)
        conn.close()
