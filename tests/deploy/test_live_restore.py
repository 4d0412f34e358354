"""`POST /admin/restore` on a running server while Telegram keeps delivering: nothing lost, nothing
answered twice."""

from __future__ import annotations

import threading
import time
from collections import Counter

from tests.deploy.conftest import ash
from tests.support.database import query
from tests.support.faults import OWNER, AshServer, Upstream, private_text, server_env, wait_until, write_config

ADMIN = {"Authorization": "Bearer admin-token-for-tests"}


def test_restore_while_50_webhooks_arrive_loses_none_and_answers_each_once(tmp_path):
    home = tmp_path / "data"
    write_config(home, allowed=[OWNER])
    with Upstream() as upstream:
        env = server_env(home, upstream)
        server = AshServer(home, env).start()
        try:
            for update_id in range(1, 11):
                assert server.post_update(private_text(update_id, f"before {update_id}")).status_code == 200
            wait_until(lambda: len(upstream.texts_to(OWNER)) == 10, 30, "the first ten answers")
            backup = tmp_path / "backup.db"
            ash(env, "backup", str(backup))

            refused = Counter()

            def telegram() -> None:  # delivers each update until it gets 200, as Telegram does
                for update_id in range(11, 61):
                    while True:
                        answer = server.post_update(private_text(update_id, f"during {update_id}"))
                        if answer.status_code == 200:
                            break
                        assert answer.status_code == 503, answer.text
                        refused[update_id] += 1
                        time.sleep(0.05)
                    time.sleep(0.01)

            sender = threading.Thread(target=telegram)
            sender.start()
            wait_until(lambda: query(home / "ash.db", "SELECT 1 FROM inbox WHERE update_id = 25"), 30, "update 25")
            restored = server.http.post("/admin/restore", json={"path": str(backup)}, headers=ADMIN, timeout=60)
            sender.join(60)
            assert restored.status_code == 200, restored.text
            assert restored.json()["previous_copy"]

            wanted = [f"Echo: before {i}" for i in range(1, 11)] + [f"Echo: during {i}" for i in range(11, 61)]
            wait_until(lambda: set(upstream.texts_to(OWNER)) >= set(wanted), 60, "every answer")
            time.sleep(1.5)  # a second answer would come within a tick or two
            sent = Counter(upstream.texts_to(OWNER))
            assert {text: n for text, n in sent.items() if n != 1} == {}, "no turn answered twice"
            assert set(sent) == set(wanted)
            statuses = {r["update_id"]: r["status"] for r in query(home / "ash.db", "SELECT * FROM inbox")}
            assert all(statuses[i] == "done" for i in range(1, 61))
            print(f"\n{sum(refused.values())} delivery(ies) answered 503 during the restore, then stored")
        finally:
            server.stop()
