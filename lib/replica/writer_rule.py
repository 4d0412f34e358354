"""Which machine owns the database: one writer; every other machine replays writes to it.

On Fly.io a response carrying a `fly-replay` header is not sent to the client: Fly's proxy
replays the request on the machine (or region) the header names. The writer is named in
`[replica] writer` (a machine id, `fly machines list`), else by Fly's environment: with
`PRIMARY_REGION` set (fly.toml's `primary_region`), the machines of that region write and the
others replay to it. Off Fly, and by default, every machine is the writer (there is one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from lib.config import Settings


@dataclass(frozen=True)
class WriterRule:
    """Whether this machine writes, and where a request that writes goes when it does not."""

    is_writer: bool
    replay_to: str | None  # the fly-replay header's value, None on the writer

    def describe(self) -> str:
        """One line for the start-up log."""
        if self.is_writer:
            return "this machine is the writer"
        return f"this machine is not the writer: writes are replayed with fly-replay: {self.replay_to}"


def writer_rule(settings: Settings, environ: Mapping[str, str]) -> WriterRule:
    """Decide from `[replica] writer` and Fly's variables (FLY_MACHINE_ID, FLY_REGION, PRIMARY_REGION)."""
    writer = settings.config.replica.writer
    machine = environ.get("FLY_MACHINE_ID", "").strip()
    if writer:
        mine = machine == writer
        return WriterRule(mine, None if mine else f"instance={writer}")
    primary = environ.get("PRIMARY_REGION", "").strip()
    region = environ.get("FLY_REGION", "").strip()
    if primary and region and region != primary:
        return WriterRule(False, f"region={primary}")
    return WriterRule(True, None)
