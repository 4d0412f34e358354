"""The first turn after a start runs nothing slow on the event loop.

It imported the agent, the tools, Docker's client and a model SDK there (`import anthropic`
takes 5 s on two busy cores): meanwhile the worker answered no webhook, no /healthz and no other
chat. A warm-up thread now loads all of it just after start-up (lib/runtime.py Warmup) and turns
wait for it without blocking the loop. Whether an import happens on the loop does not depend on
the machine's speed, so this is what the test checks: in a fresh interpreter, a whole first turn
through the webhook imports no module on the event loop's thread."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from lib.migrations import migrate_path
from tests.support.faults import SECRET, Upstream, private_text, server_env, write_config
from tests.support.paths import REPO

pytestmark = pytest.mark.slow
CHILD = REPO / "tests" / "support" / "first_turn_child.py"


def test_a_first_turn_imports_nothing_on_the_event_loop(tmp_path):
    with Upstream() as upstream:
        home = tmp_path / "home"
        write_config(home)
        migrate_path(home / "ash.db")
        update = json.dumps(private_text(1, "hello there"))
        env = server_env(home, upstream, PYTHONPATH=str(REPO))
        done = subprocess.run(
            [sys.executable, str(CHILD), update, SECRET], env=env, cwd=REPO, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr[-3000:]
        outcome = json.loads(done.stdout.strip().splitlines()[-1])
        assert outcome["status"] == "done"
        assert upstream.texts_to(private_text(1, "")["message"]["chat"]["id"]) == ["Echo: hello there"]
    assert outcome["imported"] == [], "imported on the event loop during the first turn"
