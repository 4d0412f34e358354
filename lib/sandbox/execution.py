"""One command in a running sandbox container: the exec with its wall-clock timeout and capped
output, then the reaper (nothing the command started outlives it) and the OOM check.

The Sandbox (container.py) decides what happens to the container afterwards: kept warm,
replaced after a timeout, an OOM kill or processes that survived the reaper.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from dataclasses import dataclass
from typing import Any

from lib.sandbox.image import SANDBOX_ENV, SANDBOX_USER, WORKDIR
from lib.sandbox.output import OutputCap
from lib.sandbox.scripts import COMMAND_WRAPPER, OOM_COUNTER, REAPER

log = logging.getLogger("ash.sandbox")


class ContainerGone(Exception):
    """The warm container stopped between lookup and exec."""


@dataclass(frozen=True)
class Ran:
    """What an exec gave: its capped output, exit code (None when killed), time, and whether the
    timeout killed it."""

    output: OutputCap
    exit_code: int | None
    duration: float
    timed_out: bool


def run_command(api: Any, container_id: str, command: str, *, timeout: float, output_limit: int) -> Ran:
    """Run `command` as the sandbox user; past `timeout` seconds the container is killed (Docker
    cannot kill an exec alone). Raises ContainerGone when the container is no longer there."""
    import docker.errors

    try:
        exec_id = api.exec_create(
            container_id,
            ["/bin/sh", "-c", COMMAND_WRAPPER, "sh", command],
            user=SANDBOX_USER,
            environment=dict(SANDBOX_ENV),
            workdir=WORKDIR,
            stdout=True,
            stderr=True,
        )["Id"]
    except docker.errors.APIError as exc:
        if exc.status_code in (404, 409):
            raise ContainerGone from None
        raise
    killed = threading.Event()

    def kill() -> None:
        # Docker cannot kill an exec alone; killing the container stops everything it started.
        killed.set()
        try:
            api.kill(container_id)
        except Exception as exc:
            log.warning("could not kill timed-out sandbox %s: %s", container_id[:12], exc)

    cap = OutputCap(output_limit)
    started = time.monotonic()
    timer = threading.Timer(timeout, kill)
    timer.daemon = True
    timer.start()
    try:
        for chunk in api.exec_start(exec_id, stream=True):
            cap.feed(chunk)
    except Exception:
        if not killed.is_set():
            raise
    finally:
        timer.cancel()
    duration = time.monotonic() - started
    timed_out = killed.is_set()
    return Ran(cap, None if timed_out else exit_code(api, exec_id), duration, timed_out)


def reap(api: Any, container_id: str) -> bool:
    """Kill every process the command left (REAPER); False when some survived (the container
    must then be replaced). A container the command stopped itself has nothing left: True."""
    import docker.errors

    try:
        exec_id = api.exec_create(container_id, ["/bin/sh", "-c", REAPER], user=SANDBOX_USER)["Id"]
        api.exec_start(exec_id)
        code = exit_code(api, exec_id)
    except docker.errors.APIError as exc:
        if exc.status_code in (404, 409):
            return True  # the command stopped the container itself: nothing left to kill
        raise
    if code != 0:
        log.warning("sandbox %s: processes survived the reaper (exit %s); replacing it", container_id[:12], code)
        return False
    return True


def oom_killed(api: Any, container_id: str) -> bool:
    """Whether the kernel's OOM killer fired in the container (its cgroup counts kills)."""
    import docker.errors

    try:
        exec_id = api.exec_create(container_id, ["/bin/sh", "-c", OOM_COUNTER], user=SANDBOX_USER)["Id"]
        counters = api.exec_start(exec_id).decode("utf-8", "replace")
    except docker.errors.APIError:
        return True  # PID 1 itself went: only the OOM killer sends SIGKILL unasked.
    kills = re.search(r"^oom_kill (\d+)", counters, re.MULTILINE)
    if kills:
        return int(kills.group(1)) > 0
    try:  # no counter (old kernel): the engine's flag, set from the OOM event
        return bool(api.inspect_container(container_id)["State"].get("OOMKilled"))
    except docker.errors.NotFound:
        return True


def exit_code(api: Any, exec_id: str) -> int | None:
    """The exec's exit code; the engine may need a moment to record it after the stream ends."""
    for _ in range(50):
        info = api.exec_inspect(exec_id)
        if not info.get("Running") and info.get("ExitCode") is not None:
            return info["ExitCode"]
        time.sleep(0.01)
    return None
