"""Noticing events by rules (lib/schedule/events.py) and when Ash checks in after them
(lib/schedule/followups.py): pure functions of the text, the zone and `now`."""

from __future__ import annotations

import json
import zoneinfo
from datetime import date, datetime, time

import pytest

from lib.config import Config, Secrets, Settings
from lib.schedule import events
from lib.schedule.followups import check_in_at, in_quiet, out_of_quiet, quiet_window
from tests.support.paths import REPO

LISBON = zoneinfo.ZoneInfo("Europe/Lisbon")
MONDAY = datetime(2026, 3, 2, 9, 0, tzinfo=LISBON).timestamp()  # as the labelled set is read


def settings(quiet: str = "22:00-08:00") -> Settings:
    config = Config()
    config.followups.quiet_hours = quiet
    return Settings(
        config=config,
        secrets=Secrets(),
        home=REPO,
        config_path=REPO / "config.toml",
        config_file_found=False,
        database_path=REPO / "none.db",
        workspace=REPO / "workspace",
        home_from="test",
    )


@pytest.mark.parametrize(
    ("text", "what", "event", "day", "clock"),
    [
        ("I have a job interview Thursday at 10", "event", "job interview", date(2026, 3, 5), time(10)),
        ("flight to Lisbon on Friday", "event", "flight to Lisbon", date(2026, 3, 6), None),
        ("dentist tomorrow 3pm", "event", "dentist", date(2026, 3, 3), time(15)),
        ("exam next week", "event", "exam", date(2026, 3, 13), None),
        ("first date tonight at 7!! so nervous", "event", "date", date(2026, 3, 2), time(19)),
        ("the interview moved to Friday", "move", "interview", date(2026, 3, 6), None),
        ("dentist moved to Thursday at 4pm", "move", "dentist", date(2026, 3, 5), time(16)),
        ("dentist cancelled", "cancel", "dentist", None, None),
        ("Actually the wedding has been postponed", "cancel", "wedding", None, None),
    ],
)
def test_events_changes_and_cancellations_are_read(text, what, event, day, clock):
    noticed = events.notice(text, LISBON, MONDAY)
    assert (noticed.what, noticed.event, noticed.day, noticed.clock) == (what, event, day, clock)


@pytest.mark.parametrize(
    "text",
    [
        "Remind me tomorrow at 9 to call Ana",  # the schedule tool's
        "When is the next flight from Lisbon to London?",
        "The interview yesterday went really well",
        "every Thursday at 10 we have standup",
        "I think I'll call my mom on Sunday",  # "call" with no determiner is a verb
        "I have a dentist I really like",  # no day
        "Dentist today at 8",  # already past at 09:00
    ],
)
def test_no_event_in_questions_requests_habits_the_past_or_without_a_time(text):
    assert events.notice(text, LISBON, MONDAY) is None


def test_the_committed_labelled_set_is_read_as_the_readme_says():
    rows = [json.loads(line) for line in (REPO / "bench/data/followup_messages.jsonl").read_text().splitlines()]
    wrong = [
        r["id"]
        for r in rows
        if (events.notice(r["text"], LISBON, MONDAY) or events.Noticed("none", "", frozenset())).what != r["label"]
    ]
    assert wrong == [107, 125]  # "Date is moved ...", "Train was cancelled ...": loose words at a sentence's start


def test_quiet_hours_cross_midnight_and_a_check_in_inside_them_waits_for_their_end():
    window = quiet_window(settings())
    at = datetime(2026, 3, 2, 23, 0, tzinfo=LISBON).timestamp()
    assert in_quiet(at, LISBON, window)
    assert not in_quiet(datetime(2026, 3, 2, 21, 59, tzinfo=LISBON).timestamp(), LISBON, window)
    assert out_of_quiet(at, LISBON, window) == datetime(2026, 3, 3, 8, 0, tzinfo=LISBON).timestamp()
    early = datetime(2026, 3, 3, 6, 0, tzinfo=LISBON).timestamp()
    assert out_of_quiet(early, LISBON, window) == datetime(2026, 3, 3, 8, 0, tzinfo=LISBON).timestamp()
    assert not in_quiet(at, LISBON, quiet_window(settings("00:00-00:00")))  # equal ends: none


def test_check_in_after_a_timed_event_or_on_the_evening_of_an_all_day_one_across_dst():
    # Sunday 29 March 2026: Lisbon moves from UTC+0 to UTC+1 at 01:00.
    all_day = datetime(2026, 3, 29, 0, 0, tzinfo=LISBON).timestamp()
    assert check_in_at(all_day, True, LISBON, settings()) == datetime(2026, 3, 29, 19, 0, tzinfo=LISBON).timestamp()
    nine = datetime(2026, 3, 29, 9, 0, tzinfo=LISBON).timestamp()
    assert check_in_at(nine, False, LISBON, settings()) == datetime(2026, 3, 29, 11, 0, tzinfo=LISBON).timestamp()
    late = datetime(2026, 3, 29, 21, 30, tzinfo=LISBON).timestamp()
    assert check_in_at(late, False, LISBON, settings()) == datetime(2026, 3, 30, 8, 0, tzinfo=LISBON).timestamp()
