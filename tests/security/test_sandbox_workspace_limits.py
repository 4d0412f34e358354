"""Attacks on the sandbox's disk and lifetime, against a real Docker engine.

Each test is an attack the sandbox must stop: filling the host's disk through /workspace,
keeping a warm container alive forever from inside it, leaving a process running past its
command, and workspaces that pile up forever.
"""

from __future__ import annotations

import os
import shutil
import time

import pytest

from lib.sandbox.container import Sandbox
from lib.sandbox.layout import container_name, disk_volume_name, volume_name
from tests.support.sandbox import small_config

pytestmark = pytest.mark.docker

LIMIT = 20 * 1024 * 1024
IDLE = 2.0
KEEP_ALIVE = (
    "setsid sh -c 'while :; do touch /tmp/.ash-active; sleep 1; done' >/dev/null 2>&1 & "
    "touch -d 2099-01-01 /tmp/.ash-active 2>/dev/null; "
    "( setsid sleep 300 >/dev/null 2>&1 & ) ; "
    "nohup sh -c 'sleep 301' >/dev/null 2>&1 & "
    "echo planted"
)


@pytest.fixture
def boxes(docker_client):
    """Sandboxes with small limits; their sweepers stop when the test ends."""
    made: list[Sandbox] = []

    def make(sweeper: bool = True, **overrides) -> Sandbox:
        values = {"workspace_limit": "20m", "idle_timeout": IDLE}
        values.update(overrides)
        made.append(Sandbox(small_config(**values), client=docker_client, sweeper=sweeper))
        return made[-1]

    yield make
    for box in made:
        box._stop.set()


def exists(docker_client, kind: str, name: str) -> bool:
    import docker.errors

    try:
        getattr(docker_client, kind).get(name)
    except docker.errors.NotFound:
        return False
    return True


def wait_gone(docker_client, name: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not exists(docker_client, "containers", name):
            return True
        time.sleep(0.2)
    return False


def data_root(docker_client) -> str | None:
    """The Docker data root, when the engine is local (a remote host's disk cannot be measured here)."""
    for path in ("/tmp/ash-docker", docker_client.info().get("DockerRootDir") or ""):
        if path and os.path.isdir(path):
            return path
    return None


def test_filling_the_workspace_stops_at_the_limit_and_spares_the_host(boxes, chat_keys, docker_client):
    box, key = boxes(), chat_keys()
    root = data_root(docker_client)
    box.run_sync(key, "true")  # the workspace exists before the host is measured
    before = shutil.disk_usage(root).free if root else 0
    fill = "dd if=/dev/zero of=/workspace/fill{n} bs=1M count=60 2>&1; echo rc=$?"
    first = box.run_sync(key, fill.format(n=1))
    second = box.run_sync(key, fill.format(n=2))
    assert "No space left on device" in first.output and "rc=1" in first.output, first.output
    assert "No space left on device" in second.output, second.output
    size = box.run_sync(key, "du -sk /workspace | cut -f1").output.split()[0]
    assert int(size) * 1024 <= LIMIT
    if root:
        # 120 MB were attempted; the host lost at most the limit (plus slack for other activity).
        assert before - shutil.disk_usage(root).free < LIMIT + 8 * 1024 * 1024
    # The sandbox is still locked down: no capabilities, the loop device is not visible inside.
    inside = box.run_sync(key, "grep CapEff /proc/self/status; ls /dev | grep -c loop")
    assert "CapEff:\t0000000000000000" in inside.output
    assert inside.output.split()[-1] == "0"


def test_workspace_survives_idle_removal_of_the_container(boxes, chat_keys, docker_client):
    box, key = boxes(), chat_keys()
    assert box.run_sync(key, "echo kept > /workspace/note && echo ok").output.strip() == "ok"
    assert wait_gone(docker_client, container_name(key), IDLE + 2 * box.sweep_interval() + 10)
    assert box.run_sync(key, "cat /workspace/note").output.strip() == "kept"


def test_a_command_cannot_keep_its_container_alive(boxes, chat_keys, docker_client):
    box, key = boxes(), chat_keys()
    planted = box.run_sync(key, KEEP_ALIVE)
    assert planted.output.strip() == "planted"
    # Nothing the command started survives into the next command: setsid, double fork, nohup.
    ps = box.run_sync(key, "ps -o pid,args 2>/dev/null || ps")
    for leftover in ("while", "sleep 1", "sleep 300", "sleep 301", "ash-active"):
        assert leftover not in ps.output, ps.output
    # Idle time is Ash's to count: the container goes after idle_timeout plus one sweep.
    started = time.monotonic()
    assert wait_gone(docker_client, container_name(key), IDLE + 2 * box.sweep_interval() + 10)
    assert time.monotonic() - started >= IDLE - 0.5


def test_workspaces_of_chats_idle_past_the_ttl_are_deleted(boxes, chat_keys, docker_client):
    ttl = 3.0
    box = boxes(sweeper=False, idle_timeout=1.0, workspace_ttl_days=ttl / 86_400)
    old, recent = chat_keys(), chat_keys()
    box.run_sync(old, "echo old > /workspace/f")
    time.sleep(1.2)
    box.sweep(keys={old, recent})  # the idle container goes; its workspace stays
    assert not exists(docker_client, "containers", container_name(old))
    assert exists(docker_client, "volumes", disk_volume_name(old))
    time.sleep(ttl + 0.5)
    box.run_sync(recent, "echo recent > /workspace/f")
    time.sleep(1.2)
    box.sweep(keys={old, recent})  # stops `recent` (used just now), deletes `old` (unused past the TTL)
    box.sweep(keys={old, recent})
    assert not exists(docker_client, "volumes", disk_volume_name(old))
    assert not exists(docker_client, "volumes", volume_name(old))
    assert exists(docker_client, "volumes", disk_volume_name(recent))
    assert box.run_sync(recent, "cat /workspace/f").output.strip() == "recent"
    # The deleted chat starts again from an empty workspace.
    assert box.run_sync(old, "ls -A /workspace | wc -l").output.strip() == "0"
