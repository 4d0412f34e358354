"""Whether the sandbox is on: `[sandbox] enabled`, and for "auto" whether a Docker engine answers.

"auto" asks the engine (DOCKER_HOST) at most once every PROBE_TTL seconds per host, so a turn
does not pay a Docker round trip, and an engine that comes up (or goes away) is noticed within
that time. A host without Docker (the documented Fly deploy) then simply has no bash tool,
instead of one that fails on every call.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lib.config import SandboxConfig

PROBE_TTL = 30.0
# An engine that does not answer this fast is treated as absent until the next probe (the probe
# blocks: the agent asks on a worker thread, lib/agent/turn.py offered_tools).
PROBE_TIMEOUT = 2.0


def engine_answers(timeout: float = PROBE_TIMEOUT) -> bool:
    """True when the Docker engine named by the environment answers its version endpoint."""
    import docker

    try:
        client = docker.from_env(timeout=timeout)  # asks the engine for its API version
    except Exception:
        return False
    client.close()
    return True


class EngineProbe:
    """The engine's last answer per DOCKER_HOST, asked again once it is `ttl` seconds old."""

    def __init__(
        self,
        ask: Callable[[], bool] = engine_answers,
        *,
        ttl: float = PROBE_TTL,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._ask = ask
        self._ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._answers: dict[str | None, tuple[float, bool]] = {}

    def answers(self) -> bool:
        """The engine's answer, from the cache while it is fresh."""
        host = os.environ.get("DOCKER_HOST")
        now = self._clock()
        with self._lock:
            cached = self._answers.get(host)
            if cached is not None and now - cached[0] < self._ttl:
                return cached[1]
            answer = self._ask()
            self._answers[host] = (now, answer)
            return answer


_PROBE = EngineProbe()


def sandbox_enabled(config: SandboxConfig) -> bool:
    """Whether the bash tool is offered now: `enabled = true`, or "auto" with an engine answering."""
    if config.enabled == "auto":
        return _PROBE.answers()
    return config.enabled
