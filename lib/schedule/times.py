"""When a task runs: reading the times people give, in their time zone, and each next run.

A time without a zone is in the person's zone (their profile's, else config.toml's `timezone`),
never silently UTC. One-time tasks and intervals are instants: "every 2 hours" is 7,200 seconds
whatever the clocks do. Cron tasks follow the wall clock of their zone (croniter reads the
expression over local times), so a daily 08:00 task stays at 08:00 local across a DST change.
Two local times need a rule, the same for cron runs and for one-time tasks:

- a time that does not exist, skipped when clocks go forward, runs as far past the change as it
  was past the start of the gap: 02:30 on a night the clocks jump from 02:00 to 03:00 is 03:30
  (Python's fold=0 reading of a gap time, PEP 495);
- a time that happens twice, when clocks go back, runs once, the first time.

Every function takes `now` (Unix seconds) rather than reading a clock, so tests control time.
"""

from __future__ import annotations

import math
import re
import zoneinfo
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from itertools import pairwise

from lib.errors import ScheduleError

ONCE, INTERVAL, CRON = "once", "interval", "cron"
# The shortest repeat: cron's own resolution, and no reminder needs a shorter one.
MIN_INTERVAL = 60
# Steps searched for the next cron run past a DST fold (a per-minute task skips up to an hour).
MAX_CRON_STEPS = 2000
# Missed runs counted one by one after downtime; beyond this the note says "at least".
MAX_COUNTED = 1000
CRON_ALIASES = frozenset({"@hourly", "@daily", "@midnight", "@weekly", "@monthly", "@yearly", "@annually"})

UNITS = {
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3600),
    **dict.fromkeys(("d", "day", "days"), 86400),
    **dict.fromkeys(("w", "wk", "wks", "week", "weeks"), 604800),
}
SPAN_PART = re.compile(r"(\d+|an?)\s*([a-z]+)")
SPAN = re.compile(r"(?:(?:\d+|an?)\s*[a-z]+\s*)+")
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
DAY_WORDS = "today|tomorrow|" + "|".join(WEEKDAYS)
CLOCK = r"(?P<hour>\d{1,2})(?:[:.](?P<minute>\d{2}))?\s*(?P<half>am|pm|a\.m\.|p\.m\.)?|(?P<word>noon|midnight)"
DAY_AND_CLOCK = re.compile(
    rf"(?:(?:on\s+)?(?:next\s+)?(?P<day>{DAY_WORDS})\s+)?(?:at\s+)?(?:{CLOCK})(?:\s+(?P<day_after>{DAY_WORDS}))?"
)
DATE_ONLY = re.compile(r"\d{4}-\d{2}-\d{2}")
HOW_TO_SAY_WHEN = (
    "Use an ISO time such as 2026-05-01T09:00 (read in {zone} unless it has an offset), "
    "'in 20 minutes', 'tomorrow at 9', 'friday 18:30' or '21:00'."
)


def zone(name: str) -> zoneinfo.ZoneInfo:
    """The IANA zone `name`, or a ScheduleError saying it is not one."""
    try:
        return zoneinfo.ZoneInfo(name.strip())
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ScheduleError(
            f"There is no time zone called {name!r}: use an IANA name such as Europe/Lisbon, "
            "America/New_York or Asia/Tokyo (or UTC)."
        ) from None


def to_instant(local: datetime, tz: zoneinfo.ZoneInfo) -> float:
    """A wall-clock time in `tz` as Unix seconds, by the module's rules for skipped and repeated
    times (fold=0: a gap time reads with the offset from before the change, a repeated one as
    its first occurrence)."""
    return local.replace(tzinfo=tz, fold=0).timestamp()


def local_time(instant: float, tz: zoneinfo.ZoneInfo) -> datetime:
    """Unix seconds as an aware datetime in `tz`."""
    return datetime.fromtimestamp(instant, tz)


def span_seconds(text: str) -> int:
    """ "20 minutes", "1h30m", "an hour", "2 days" as seconds; ScheduleError otherwise."""
    words = " ".join(text.lower().replace(",", " ").replace(" and ", " ").split())
    if not SPAN.fullmatch(words):
        raise ScheduleError(f"I can't read {text!r} as a length of time: say e.g. '20 minutes', '2 hours' or '1h30m'.")
    total = 0
    for count, unit in SPAN_PART.findall(words):
        if unit not in UNITS:
            raise ScheduleError(f"{unit!r} is not a unit of time: use seconds, minutes, hours, days or weeks.")
        total += (1 if count in ("a", "an") else int(count)) * UNITS[unit]
    return total


def parse_at(text: str, tz: zoneinfo.ZoneInfo, now: float) -> float:
    """A one-time moment as Unix seconds: an ISO time (in `tz` unless it carries an offset),
    "in 20 minutes", "tomorrow at 9", "friday 18:30", or a bare "21:00" (its next occurrence).
    ScheduleError when it cannot be read or is not in the future."""
    given = text.strip()
    words = " ".join(given.lower().split())
    if words.startswith("in "):
        moment = now + span_seconds(words[3:])
    elif DATE_ONLY.fullmatch(given):
        raise ScheduleError(f"{given} has no time of day: give one too, such as {given}T09:00.")
    elif (iso := _iso(given)) is not None:
        moment = iso.timestamp() if iso.tzinfo is not None else to_instant(iso, tz)
    elif (found := DAY_AND_CLOCK.fullmatch(words)) is not None:
        moment = _day_and_clock(found, tz, now)
    else:
        raise ScheduleError(f"I can't read {given!r} as a time. " + HOW_TO_SAY_WHEN.format(zone=tz.key))
    if moment <= now:
        shown = local_time(moment, tz)
        raise ScheduleError(
            f"That time ({shown:%Y-%m-%d %H:%M} {tz.key}) is in the past: it is now "
            f"{local_time(now, tz):%Y-%m-%d %H:%M} there."
        )
    return moment


def _iso(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def clock_of(found: re.Match) -> time:
    """The time of day a CLOCK match says ("3pm", "14:00", "noon")."""
    if found["word"]:
        return time(12) if found["word"] == "noon" else time(0)
    hour, minute = int(found["hour"]), int(found["minute"] or 0)
    half = (found["half"] or "").replace(".", "")
    if half and not 1 <= hour <= 12:
        raise ScheduleError(f"{hour} {half} is not a time: with am or pm the hour is 1 to 12.")
    if half:
        hour = hour % 12 + (12 if half == "pm" else 0)
    if hour > 23 or minute > 59:
        raise ScheduleError(f"{found.group(0)!r} is not a time of day: hours go to 23, minutes to 59.")
    return time(hour, minute)


def _day_and_clock(found: re.Match, tz: zoneinfo.ZoneInfo, now: float) -> float:
    """ "tomorrow at 9" and the like; a bare time means its next occurrence."""
    at = clock_of(found)
    today = local_time(now, tz).date()
    day_word = found["day"] or found["day_after"]
    if day_word is None:
        moment = to_instant(datetime.combine(today, at), tz)
        return moment if moment > now else to_instant(datetime.combine(today + timedelta(days=1), at), tz)
    if day_word == "today":
        return to_instant(datetime.combine(today, at), tz)
    if day_word == "tomorrow":
        return to_instant(datetime.combine(today + timedelta(days=1), at), tz)
    ahead = (WEEKDAYS.index(day_word) - today.weekday()) % 7
    moment = to_instant(datetime.combine(today + timedelta(days=ahead), at), tz)
    # "friday 9:00" said on a Friday after nine means next week's.
    return moment if moment > now else to_instant(datetime.combine(today + timedelta(days=ahead + 7), at), tz)


def span_text(seconds: float) -> str:
    """7200 -> "2 hours", 5400 -> "1 hour 30 minutes"."""
    parts = []
    remaining = int(seconds)
    for unit, size in (("week", 604800), ("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1)):
        count, remaining = divmod(remaining, size)
        if count:
            parts.append(f"{count} {unit}{'s' if count > 1 else ''}")
    return " ".join(parts) or "0 seconds"


def parse_every(text: str) -> int:
    """ "15 minutes", "every 2 hours", "day" as whole seconds, at least MIN_INTERVAL."""
    words = " ".join(text.lower().split()).removeprefix("every ").strip()
    seconds = span_seconds(words if SPAN.fullmatch(words) else f"1 {words}")
    if seconds < MIN_INTERVAL:
        raise ScheduleError("The shortest interval is one minute.")
    return seconds


def _croniter():
    """croniter, imported on first use: ~20 ms the server's cold start does not need to pay."""
    import croniter

    return croniter


def check_cron(expression: str) -> str:
    """A five-field cron expression (or @daily and the like) that runs at some time, normalised."""
    cron = _croniter()
    normal = " ".join(expression.split())
    usable = normal.lower() in CRON_ALIASES or (len(normal.split()) == 5 and cron.croniter.is_valid(normal))
    if usable:
        try:
            cron.croniter(normal, datetime(2000, 1, 1)).get_next(datetime)
        except cron.CroniterBadDateError:
            raise ScheduleError(f"The cron expression {normal!r} never runs (no date matches it).") from None
        except cron.CroniterBadCronError:
            usable = False
    if not usable:
        raise ScheduleError(
            f"{expression!r} is not a cron expression Ash can use: give five fields (minute hour day-of-month "
            "month day-of-week), such as '0 8 * * *' (every day at 08:00) or '*/30 9-17 * * mon-fri', "
            "or @hourly, @daily, @weekly, @monthly."
        )
    return normal


@dataclass(frozen=True)
class Timing:
    """When a task runs: once at `starts_at`; every `interval_seconds` from `starts_at`; or on
    the `cron` expression read in `timezone` (`starts_at` is then when it was made)."""

    kind: str
    starts_at: float
    timezone: str
    interval_seconds: int | None = None
    cron: str | None = None

    @property
    def tz(self) -> zoneinfo.ZoneInfo:
        return zoneinfo.ZoneInfo(self.timezone)

    def first_run(self, now: float) -> float:
        """The first run of a task made at `now`."""
        return self.next_after(now) if self.kind == CRON else self.starts_at

    def next_after(self, after: float) -> float | None:
        """The first run strictly after `after`; None for a one-time task that has run."""
        if self.kind == ONCE:
            return self.starts_at if self.starts_at > after else None
        if self.kind == INTERVAL:
            if after < self.starts_at:
                return self.starts_at
            return self.starts_at + (math.floor((after - self.starts_at) / self.interval_seconds) + 1) * (
                self.interval_seconds
            )
        return self._next_cron(after)

    def _next_cron(self, after: float) -> float:
        tz = self.tz
        # Candidates come in wall-clock order; converted with fold=0 they never go backwards, and
        # any before `after` (the repeated hour of a fold) are passed over, so none runs twice.
        runs = _croniter().croniter(self.cron, local_time(after, tz).replace(tzinfo=None))
        for _ in range(MAX_CRON_STEPS):
            moment = to_instant(runs.get_next(datetime), tz)
            if moment > after:
                return moment
        raise ScheduleError(f"no run of {self.cron!r} found after {after}")  # a fold is an hour or two at most

    def latest_due(self, first_due: float, now: float) -> tuple[float, int]:
        """After downtime: the latest run time at or before `now` (from `first_due`, the first one
        missed) and how many earlier ones it stands for. A recurring task then runs once for the
        whole missed period, not once per missed time."""
        if self.kind == ONCE or now < first_due:
            return first_due, 0
        if self.kind == INTERVAL:
            steps = math.floor((now - first_due) / self.interval_seconds)
            return first_due + steps * self.interval_seconds, steps
        latest, missed = first_due, 0
        while missed < MAX_COUNTED:
            following = self._next_cron(latest)
            if following > now:
                return latest, missed
            latest, missed = following, missed + 1
        return self._latest_cron_before(now), missed

    def _latest_cron_before(self, now: float) -> float:
        """The last cron run at or before `now`, found backwards (for very long downtimes)."""
        tz = self.tz
        runs = _croniter().croniter(self.cron, local_time(now, tz).replace(tzinfo=None) + timedelta(seconds=1))
        for _ in range(MAX_CRON_STEPS):
            moment = to_instant(runs.get_prev(datetime), tz)
            if moment <= now:
                return moment
        raise ScheduleError(f"no run of {self.cron!r} found before {now}")

    def shortest_gap(self, now: float, runs: int = 48) -> float:
        """The shortest time between two of the next `runs` runs (inf for a one-time task)."""
        if self.kind == ONCE:
            return math.inf
        if self.kind == INTERVAL:
            return float(self.interval_seconds)
        moments = [self.first_run(now)]
        for _ in range(runs - 1):
            moments.append(self.next_after(moments[-1]))
        return min(later - earlier for earlier, later in pairwise(moments))


def parse_timing(*, at: str | None, every: str | None, cron: str | None, tz: zoneinfo.ZoneInfo, now: float) -> Timing:
    """The Timing of a task from what was said: `at` alone (once), `every` (optionally from
    `at`), or `cron`. ScheduleError names what is missing or wrong."""
    at, every, cron = (v.strip() if v and v.strip() else None for v in (at, every, cron))
    if cron is not None:
        if at is not None or every is not None:
            raise ScheduleError("Give either cron, or at and/or every, not both: cron says every time it runs.")
        return Timing(CRON, now, tz.key, cron=check_cron(cron))
    if every is not None:
        interval = parse_every(every)
        starts = parse_at(at, tz, now) if at is not None else now + interval
        return Timing(INTERVAL, starts, tz.key, interval_seconds=interval)
    if at is not None:
        return Timing(ONCE, parse_at(at, tz, now), tz.key)
    raise ScheduleError(
        "Say when: at (one time, e.g. 'in 20 minutes' or 'tomorrow at 9'), every (e.g. '15 minutes', "
        "optionally with at for the first run) or cron (e.g. '0 8 * * *')."
    )
