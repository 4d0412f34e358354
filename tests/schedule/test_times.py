"""Reading times in a zone and finding next runs: relative, ISO, cron, DST gaps and folds, catch-up."""

from __future__ import annotations

import zoneinfo
from datetime import UTC, datetime

import pytest

from lib.errors import ScheduleError
from lib.schedule.times import CRON, INTERVAL, Timing, check_cron, parse_at, parse_every, parse_timing, zone

LISBON = zoneinfo.ZoneInfo("Europe/Lisbon")
NEW_YORK = zoneinfo.ZoneInfo("America/New_York")
# A Friday morning in Lisbon, two days before the clocks go forward (Sunday 29 March 2026, 01:00 UTC).
NOW = datetime(2026, 3, 27, 10, 0, tzinfo=LISBON).timestamp()


def utc(instant: float) -> datetime:
    return datetime.fromtimestamp(instant, UTC)


def local(instant: float, tz: zoneinfo.ZoneInfo) -> str:
    return f"{datetime.fromtimestamp(instant, tz):%Y-%m-%d %H:%M %Z}"


@pytest.mark.parametrize(
    ("said", "expected"),
    [
        ("in 20 minutes", "2026-03-27 10:20 WET"),
        ("in 2 seconds", "2026-03-27 10:00 WET"),
        ("In 1h30m", "2026-03-27 11:30 WET"),
        ("in an hour", "2026-03-27 11:00 WET"),
        ("tomorrow at 9", "2026-03-28 09:00 WET"),
        ("9am tomorrow", "2026-03-28 09:00 WET"),
        ("21:00", "2026-03-27 21:00 WET"),
        ("at 7pm", "2026-03-27 19:00 WET"),
        ("09:30", "2026-03-28 09:30 WET"),  # already past today: the next one
        ("friday 18:30", "2026-03-27 18:30 WET"),
        ("monday at noon", "2026-03-30 12:00 WEST"),  # after the change: still noon on the wall clock
        ("2026-05-01T09:00", "2026-05-01 09:00 WEST"),  # no zone: the person's, not UTC
        ("2026-05-01 09:00+02:00", "2026-05-01 08:00 WEST"),  # an offset is honoured
        ("2026-05-01T09:00Z", "2026-05-01 10:00 WEST"),
    ],
)
def test_times_people_say_are_read_in_their_zone(said, expected):
    assert local(parse_at(said, LISBON, NOW), LISBON) == expected


def test_in_two_seconds_is_two_seconds():
    assert parse_at("in 2 seconds", LISBON, NOW) == NOW + 2


@pytest.mark.parametrize(
    ("said", "message"),
    [
        ("2020-01-01T00:00", "That time (2020-01-01 00:00 Europe/Lisbon) is in the past: it is now 2026-03-27 10:00"),
        ("today at 9", "is in the past"),
        ("2026-05-01", "has no time of day: give one too, such as 2026-05-01T09:00"),
        ("yesterday", "I can't read 'yesterday' as a time. Use an ISO time such as 2026-05-01T09:00"),
        ("25:00", "is not a time of day"),
        ("13pm", "with am or pm the hour is 1 to 12"),
        ("in 3 fortnights", "'fortnights' is not a unit of time"),
        ("in soon", "as a length of time"),
    ],
)
def test_times_that_cannot_be_used_say_why(said, message):
    with pytest.raises(ScheduleError) as raised:
        parse_at(said, LISBON, NOW)
    assert message in str(raised.value)


def test_an_unknown_zone_is_named():
    with pytest.raises(ScheduleError, match="There is no time zone called 'Mars/Olympus': use an IANA name"):
        zone("Mars/Olympus")


def test_intervals_and_their_floor():
    assert parse_every("15 minutes") == 900
    assert parse_every("every 2 hours") == 7200
    assert parse_every("day") == 86400
    assert parse_every("1h30m") == 5400
    with pytest.raises(ScheduleError, match="The shortest interval is one minute"):
        parse_every("30 seconds")


@pytest.mark.parametrize("expression", ["0 8 * * *", "*/30 9-17 * * mon-fri", "@daily", "  0  8 * * 1 "])
def test_cron_expressions_ash_accepts(expression):
    assert check_cron(expression) == " ".join(expression.split())


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("0 8 * * * *", "give five fields"),  # croniter reads a sixth field as seconds: not standard cron
        ("61 * * * *", "give five fields"),
        ("every day", "give five fields"),
        ("@reboot", "give five fields"),
        ("0 0 30 2 *", "never runs"),
    ],
)
def test_cron_expressions_ash_refuses(expression, message):
    with pytest.raises(ScheduleError) as raised:
        check_cron(expression)
    assert message in str(raised.value)


def test_when_must_be_said_once():
    with pytest.raises(ScheduleError, match="Say when"):
        parse_timing(at=None, every=None, cron=None, tz=LISBON, now=NOW)
    with pytest.raises(ScheduleError, match="either cron, or at and/or every"):
        parse_timing(at="in 5 minutes", every=None, cron="0 8 * * *", tz=LISBON, now=NOW)


def test_a_daily_cron_stays_at_eight_local_across_the_spring_change():
    timing = parse_timing(at=None, every=None, cron="0 8 * * *", tz=LISBON, now=NOW)
    runs = [timing.first_run(NOW)]
    for _ in range(3):
        runs.append(timing.next_after(runs[-1]))
    assert [local(r, LISBON) for r in runs] == [
        "2026-03-28 08:00 WET",
        "2026-03-29 08:00 WEST",
        "2026-03-30 08:00 WEST",
        "2026-03-31 08:00 WEST",
    ]
    # In UTC the run moves an hour: that is what staying at 08:00 local means.
    assert [utc(r).hour for r in runs] == [8, 7, 7, 7]


def test_and_across_the_autumn_change():
    before = datetime(2026, 10, 24, 12, 0, tzinfo=LISBON).timestamp()
    timing = Timing(CRON, before, "Europe/Lisbon", cron="0 8 * * *")
    first = timing.first_run(before)
    second = timing.next_after(first)
    assert (local(first, LISBON), local(second, LISBON)) == ("2026-10-25 08:00 WET", "2026-10-26 08:00 WET")
    assert second - first == 24 * 3600


def test_a_time_the_spring_change_skips_runs_as_far_past_the_change():
    # New York, 8 March 2026: clocks jump from 02:00 to 03:00; 02:30 does not exist that night.
    day_before = datetime(2026, 3, 7, 12, 0, tzinfo=NEW_YORK).timestamp()
    timing = Timing(CRON, day_before, "America/New_York", cron="30 2 * * *")
    skipped_night = timing.first_run(day_before)
    assert local(skipped_night, NEW_YORK) == "2026-03-08 03:30 EDT"
    assert local(timing.next_after(skipped_night), NEW_YORK) == "2026-03-09 02:30 EDT"
    # A one-time task at that time is read by the same rule.
    assert local(parse_at("2026-03-08T02:30", NEW_YORK, day_before), NEW_YORK) == "2026-03-08 03:30 EDT"


def test_a_time_the_autumn_change_repeats_runs_once_the_first_time():
    # New York, 1 November 2026: 01:30 happens twice (EDT, then EST).
    day_before = datetime(2026, 10, 31, 12, 0, tzinfo=NEW_YORK).timestamp()
    timing = Timing(CRON, day_before, "America/New_York", cron="30 1 * * *")
    first = timing.first_run(day_before)
    assert local(first, NEW_YORK) == "2026-11-01 01:30 EDT"
    following = timing.next_after(first)
    assert local(following, NEW_YORK) == "2026-11-02 01:30 EST"
    # Asked from inside the repeated hour (after the first 01:30), it does not run the second 01:30.
    second_pass = first + 3600 - 60  # 01:29 EST
    assert timing.next_after(second_pass) == following


def test_an_interval_is_seconds_whatever_the_clocks_do():
    start = datetime(2026, 3, 29, 0, 30, tzinfo=UTC).timestamp()
    timing = Timing(INTERVAL, start, "Europe/Lisbon", interval_seconds=3600)
    assert timing.next_after(start) - start == 3600
    assert timing.next_after(start + 1) == start + 3600


def test_after_downtime_a_recurring_task_stands_one_run_for_the_missed_period():
    start = NOW
    timing = Timing(INTERVAL, start, "UTC", interval_seconds=900)
    latest, missed = timing.latest_due(start, start + 2 * 3600 + 60)
    assert (latest, missed) == (start + 2 * 3600, 8)
    cron = Timing(CRON, NOW, "Europe/Lisbon", cron="*/15 * * * *")
    first = cron.first_run(NOW)
    latest, missed = cron.latest_due(first, first + 2 * 3600 + 60)
    assert (latest - first, missed) == (2 * 3600, 8)


def test_a_very_long_downtime_finds_the_latest_cron_run_backwards():
    cron = Timing(CRON, NOW, "Europe/Lisbon", cron="* * * * *")
    first = cron.first_run(NOW)
    latest, missed = cron.latest_due(first, first + 30 * 86400 + 30)
    assert latest == first + 30 * 86400
    assert missed == 1000  # counted up to MAX_COUNTED, then found from the end
