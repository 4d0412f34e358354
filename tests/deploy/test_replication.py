"""Continuous replication end to end: a real `ash serve` under `litestream replicate -exec`, a local
S3 server, a machine lost with SIGKILL, the database back from the replica alone."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from datetime import UTC, datetime

from tests.deploy.conftest import ash, config_extra, replica_env
from tests.support.database import query
from tests.support.faults import ASH, AshServer, free_port, private_text, server_env, wait_until, write_config

BATCH = 100
MONITOR_INTERVAL = 1.0  # Litestream's default, seconds


class ReplicatedServer(AshServer):
    """`ash replica run -- ash serve`, as the container starts it."""

    def start(self, wait: bool = True) -> ReplicatedServer:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [str(ASH), "replica", "run", "--", str(ASH), "serve", "--port", str(self.port)],
                env=self.env,
                cwd=self.home.parent,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        if wait:
            self.wait_healthy()
        return self


def _status(env: dict) -> dict:
    return json.loads(ash(env, "replica", "status", "--json").stdout)


def _stored(db, first: int, last: int) -> set[int]:
    found = query(db, "SELECT update_id FROM inbox WHERE update_id BETWEEN ? AND ?", (first, last))
    return {row["update_id"] for row in found}


def test_a_lost_machine_comes_back_from_the_replica_and_a_point_in_time(tmp_path, s3_endpoint, bucket):
    home = tmp_path / "data"
    config = write_config(tmp_path / "config", extra=config_extra(s3_endpoint))
    env = replica_env(server_env(home, None, TELEGRAM_BOT_TOKEN="", ASH_CONFIG=str(config)), bucket)
    server = ReplicatedServer(home, env, name="replicated").start()
    try:
        for update_id in range(1, BATCH + 1):
            assert server.post_update(private_text(update_id, f"first {update_id}")).status_code == 200
        # Litestream reads the WAL once a second (its monitor-interval): a position it reports after
        # that long holds the whole batch; before its first read it has none ("not initialized").
        time.sleep(MONITOR_INTERVAL + 0.2)
        local = wait_until(lambda: _status(env)["local_txid"], 30, "Litestream to read the first batch")
        wait_until(lambda: (_status(env)["replica_txid"] or 0) >= local, 30, "the replica to pass the first batch")
        time.sleep(1.1)  # the replica's file times have a one-second resolution
        between = datetime.now(UTC).replace(microsecond=0)
        time.sleep(1.1)
        acked: dict[int, float] = {}
        for update_id in range(BATCH + 1, 2 * BATCH + 1):
            assert server.post_update(private_text(update_id, f"second {update_id}")).status_code == 200
            acked[update_id] = time.monotonic()
        server.kill()  # SIGKILL to the whole tree: Litestream, the supervisor and its worker
        killed_at = time.monotonic()
    finally:
        server.stop()

    shutil.rmtree(home)  # the volume is gone with the machine
    again = ReplicatedServer(home, env, name="restored").start()
    try:
        db = home / "ash.db"
        assert _stored(db, 1, BATCH) == set(range(1, BATCH + 1)), "the first batch is complete"
        survivors = _stored(db, BATCH + 1, 2 * BATCH)
        lost = sorted(set(acked) - survivors)
        # The recovery point: the writes acknowledged in the last moments before the kill.
        window = killed_at - min(acked[u] for u in lost) if lost else 0.0
        print(f"\nrecovery point: {len(lost)} of {BATCH} updates lost, acknowledged in the last {window:.2f} s")
        assert window < 5.0, "no more than the last seconds of writes are lost (sync_interval = 1 s)"
        assert "restored" in again.output()
    finally:
        again.stop()

    # A point in time between the batches, restored into another folder: the first batch, none of the second.
    other = tmp_path / "other"
    other_env = {**env, "ASH_HOME": str(other), "PORT": str(free_port())}
    ash(other_env, "restore", "--from-replica", "--timestamp", between.isoformat().replace("+00:00", "Z"), "--yes")
    assert _stored(other / "ash.db", 1, BATCH) == set(range(1, BATCH + 1))
    assert _stored(other / "ash.db", BATCH + 1, 2 * BATCH) == set()


def test_replica_status_without_replication_says_how_to_turn_it_on(tmp_path):
    env = server_env(tmp_path / "data", None)
    done = subprocess.run([str(ASH), "replica", "status"], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 1
    assert "ASH_REPLICA_URL" in done.stderr
