"""Attack (or accident): `kill -9` of the `ash serve` supervisor. Its worker must not stay behind,
serving the port with the old configuration beside the next server (real granian processes)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import httpx
import pytest

from tests.support.faults import AshServer, server_env, wait_until, write_config

pytestmark = pytest.mark.slow


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            # The fields after the command name (which may hold spaces) start with state, ppid.
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text() if Path(f"/proc/{pid}/stat").exists() else ""
    return " Z " not in stat  # a zombie has died; only its parent has not read its status yet


def test_the_worker_dies_with_a_killed_supervisor(tmp_path):
    home = tmp_path / "home"
    write_config(home)
    server = AshServer(home, server_env(home, None)).start()
    try:
        workers = wait_until(lambda: children(server.proc.pid), 10, "granian to report its worker")
        os.kill(server.proc.pid, signal.SIGKILL)  # the supervisor only, not its process group
        server.proc.wait(10)
        wait_until(lambda: not any(alive(pid) for pid in workers), 15, "the worker to exit")
        with pytest.raises(httpx.TransportError):
            httpx.get(f"http://127.0.0.1:{server.port}/healthz", timeout=2)
    finally:
        server.kill()
