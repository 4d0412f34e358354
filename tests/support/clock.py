"""A clock the test moves: handed to the runtime (leases, Run / Deny deadlines) and the
scheduler, so a test steps past a timeout instead of sleeping through it."""

from __future__ import annotations

import time


class Clock:
    """Unix seconds that move only when the test says so."""

    def __init__(self, start: float | None = None):
        self.now = time.time() if start is None else start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now
