"""What a due task does now: the time it runs for, whether it is late or skipped, when it runs next.

Normally a task is fired within a second of its time. After downtime (the process was stopped,
crashed, or a Fly machine was asleep):

- a one-time task runs once, with a note that it is late;
- a recurring task runs once for the whole missed period, for its latest missed time, and the
  note says how many earlier times it stands for (a 15-minute task down for two hours runs once,
  not eight times);
- a run later than `[scheduler] max_lateness` is not run: it is recorded as missed and logged,
  and a recurring task goes on from its next time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from lib.schedule.times import ONCE, Timing

if TYPE_CHECKING:
    from lib.schedule.store import Job

# A run this many seconds after its time was not fired on time (Ash was not running): it is
# marked late. Firing itself takes well under a second.
LATE_AFTER = 60.0


@dataclass(frozen=True)
class Firing:
    """The decision for one due task at one moment."""

    slot: float  # the scheduled time this run is for
    late_by: float  # seconds between that time and now
    missed: int  # earlier scheduled times this run stands for, not run
    runs: bool  # False: later than max_lateness, skipped
    next_run_at: float | None  # None: the task is finished

    @property
    def late(self) -> bool:
        """Whether the person is told this run comes late."""
        return self.late_by > LATE_AFTER or self.missed > 0


def plan(
    timing: Timing,
    *,
    due_at: float,
    run_count: int,
    max_runs: int | None,
    ends_at: float | None,
    now: float,
    max_lateness: float,
) -> Firing:
    """Decide what a task due at `due_at` (its stored next run) does at `now`."""
    slot, missed = timing.latest_due(due_at, now)
    late_by = max(now - slot, 0.0)
    runs = late_by <= max_lateness
    following = None if timing.kind == ONCE else timing.next_after(max(now, slot))
    if following is not None and max_runs is not None and run_count + runs >= max_runs:
        following = None
    if following is not None and ends_at is not None and following > ends_at:
        following = None
    return Firing(slot=slot, late_by=late_by, missed=missed, runs=runs, next_run_at=following)


def plan_job(job: Job, *, now: float, max_lateness: float) -> Firing:
    """`plan` for a stored task, from its own next run, count and limits."""
    return plan(
        job.timing,
        due_at=job.next_run_at,
        run_count=job.run_count,
        max_runs=job.max_runs,
        ends_at=job.ends_at,
        now=now,
        max_lateness=max_lateness,
    )
