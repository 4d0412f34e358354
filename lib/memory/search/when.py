"""Time in what people say: relative dates resolved against when they were said, and the dates a
question names.

The miss this answers (LoCoMo, read by hand): "I went to a pottery class two weeks ago", said on
8 May, is asked about as "what did she do in late April 2023?"; "we moved here last year" is
asked as "in 2022". The words never meet. So:

- At index time each relative expression in a message is resolved against the moment it was
  said (`resolve`) and its date written into the message's chunk next to the day it was said
  ("[8 May 2023; two weeks ago: 24 April 2023]", lib/memory/search/chunking.py): BM25 and the
  embedding both see the date the question will name.
- At query time a date or period the question names ("in April 2023", "on 24 April", "in
  2022", "last week") becomes a span (`spans_in_query`), and a candidate said inside it, or
  speaking of a time inside it, is preferred (lib/memory/search/conversation.py adds TIME_BONUS).

Only plain, common English forms are recognised; anything else is left alone (no guesses).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from lib.memory.search.chunking import day_text

MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "a couple of": 2,
    "a few": 3,
    "several": 3,
}
_COUNT = (
    r"(?P<count>\d{1,2}|a couple of|a few|several|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
)
_MONTH = r"(?P<month>" + "|".join(MONTHS) + r"|jan|feb|mar|apr|jun|jul|aug|sept?|oct|nov|dec)"
_WEEKDAY = r"(?P<weekday>" + "|".join(WEEKDAYS) + r")"

RELATIVE = re.compile(
    r"\b(?:"
    rf"(?P<ago>{_COUNT}\s+(?P<unit>day|week|month|year)s?\s+ago)"
    r"|(?P<shift>(?P<direction>last|next)\s+(?P<period>week|weekend|month|year))"
    rf"|(?P<named_day>(?P<which>last|next|this)\s+{_WEEKDAY})"
    r"|(?P<yesterday>yesterday|last night)"
    r"|(?P<tomorrow>tomorrow)"
    r")\b",
    re.IGNORECASE,
)
# Dates a question names: "24 April 2023", "April 24, 2023", "April 2023", "in April", "in 2022".
DAY_MONTH = re.compile(rf"\b(?P<day>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}\b(?:,?\s+(?P<year>\d{{4}}))?", re.I)
MONTH_DAY = re.compile(rf"\b{_MONTH}\s+(?P<day>\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(?P<year>\d{{4}}))?", re.I)
MONTH_YEAR = re.compile(rf"\b{_MONTH}\s+(?:of\s+)?(?P<year>\d{{4}})\b", re.I)
IN_MONTH = re.compile(rf"\b(?:in|during|early|mid|late|end of|beginning of)\s+{_MONTH}\b", re.I)
YEAR = re.compile(r"\b(?P<year>(?:19|20)\d{2})\b")


@dataclass(frozen=True)
class Span:
    """A stretch of days, both ends included; `any_year`: the same days of every year ("in April")."""

    start: date
    end: date
    any_year: bool = False

    def meets(self, other: Span) -> bool:
        """The two spans share a day."""
        if self.any_year and not other.any_year:
            return any(self._in_year(year).meets(other) for year in range(other.start.year, other.end.year + 1))
        if other.any_year:
            return other.meets(self) if not self.any_year else self._in_year(2000).meets(other._in_year(2000))
        return self.start <= other.end and other.start <= self.end

    def _in_year(self, year: int) -> Span:
        return Span(_on(year, self.start), _on(year, self.end))


def _on(year: int, day: date) -> date:
    """The same day of the month in `year` (29 February becomes the 28th in other years)."""
    try:
        return day.replace(year=year)
    except ValueError:
        return day.replace(year=year, day=28)


@dataclass(frozen=True)
class Resolved:
    """One relative expression of a message and the time it meant."""

    phrase: str
    span: Span
    text: str  # how a question would name it: "24 April 2023", "April 2023", "2022"


def _count(text: str) -> int:
    text = " ".join(text.lower().split())
    return int(text) if text.isdigit() else NUMBERS[text]


def _month_number(name: str) -> int:
    name = name.lower()
    return next(i for i, full in enumerate(MONTHS, 1) if full.startswith(name[:3]))


def _month_span(year: int, month: int) -> Span:
    first = date(year, month, 1)
    after = date(year + (month == 12), month % 12 + 1, 1)
    return Span(first, after - timedelta(days=1))


def _shift_months(day: date, months: int) -> tuple[int, int]:
    index = day.year * 12 + day.month - 1 + months
    return index // 12, index % 12 + 1


def _month_text(year: int, month: int) -> str:
    return f"{MONTHS[month - 1].capitalize()} {year}"


def _one_day(day: date) -> tuple[Span, str]:
    return Span(day, day), day_text(day)


def _week_of(day: date) -> tuple[Span, str]:
    monday = day - timedelta(days=day.weekday())
    return Span(monday, monday + timedelta(days=6)), f"the week of {day_text(monday)}"


def _month_of(day: date, shift: int) -> tuple[Span, str]:
    year, month = _shift_months(day, shift)
    return _month_span(year, month), _month_text(year, month)


def _year_of(year: int) -> tuple[Span, str]:
    return Span(date(year, 1, 1), date(year, 12, 31)), str(year)


def _ago(said: date, count: int, unit: str) -> tuple[Span, str]:
    if unit == "day":
        return _one_day(said - timedelta(days=count))
    if unit == "week":
        day = said - timedelta(weeks=count)
        return Span(day - timedelta(days=3), day + timedelta(days=3)), day_text(day)
    if unit == "month":
        return _month_of(said, -count)
    return _year_of(said.year - count)


def _shifted(said: date, direction: str, period: str) -> tuple[Span, str]:
    sign = -1 if direction == "last" else 1
    if period == "week":
        return _week_of(said + timedelta(weeks=sign))
    if period == "weekend":
        saturday = said + timedelta(days=(5 - said.weekday()) % 7 or 7) if sign > 0 else None
        if saturday is None:
            saturday = said - timedelta(days=(said.weekday() - 5) % 7 or 7)
        return Span(saturday, saturday + timedelta(days=1)), f"the weekend of {day_text(saturday)}"
    if period == "month":
        return _month_of(said, sign)
    return _year_of(said.year + sign)


def _named_day(said: date, which: str, weekday: str) -> tuple[Span, str]:
    target = WEEKDAYS.index(weekday.lower())
    if which.lower() == "last":
        back = (said.weekday() - target) % 7 or 7
        return _one_day(said - timedelta(days=back))
    ahead = (target - said.weekday()) % 7
    if which.lower() == "next" and ahead == 0:
        ahead = 7
    return _one_day(said + timedelta(days=ahead))


def _meaning(match: re.Match, said: date) -> tuple[Span, str]:
    found = match.groupdict()
    if found["ago"]:
        return _ago(said, _count(found["count"]), found["unit"].lower())
    if found["shift"]:
        return _shifted(said, found["direction"].lower(), found["period"].lower())
    if found["named_day"]:
        return _named_day(said, found["which"], found["weekday"])
    if found["yesterday"]:
        return _one_day(said - timedelta(days=1))
    return _one_day(said + timedelta(days=1))


def resolve(text: str, said: date) -> list[Resolved]:
    """The relative expressions of `text`, each with the time it meant when said on `said`."""
    found = []
    for match in RELATIVE.finditer(text):
        span, meaning = _meaning(match, said)
        found.append(Resolved(" ".join(match.group(0).lower().split()), span, meaning))
    return found


def annotation(text: str, said: datetime | date | None) -> str:
    """What a chunk carries beside its day: "two weeks ago: 24 April 2023; last year: 2022"."""
    if said is None:
        return ""
    day = said.date() if isinstance(said, datetime) else said
    return "; ".join(dict.fromkeys(f"{r.phrase}: {r.text}" for r in resolve(text, day)))


def spans_in_query(query: str, today: date) -> list[Span]:
    """The dates and periods a question names, explicit ones first; relative ones ("last week")
    count from `today`."""
    spans: list[Span] = []
    taken: list[tuple[int, int]] = []

    def free(match: re.Match) -> bool:
        return not any(a < match.end() and match.start() < b for a, b in taken)

    for pattern in (DAY_MONTH, MONTH_DAY):
        for match in pattern.finditer(query):
            day, month = int(match["day"]), _month_number(match["month"])
            year = int(match["year"]) if match["year"] else None
            try:
                moment = date(year or 2000, month, day)  # 2000: a leap year, so 29 February parses
            except ValueError:
                continue
            spans.append(Span(moment, moment, any_year=year is None))
            taken.append(match.span())
    for match in MONTH_YEAR.finditer(query):
        if free(match):
            spans.append(_month_span(int(match["year"]), _month_number(match["month"])))
            taken.append(match.span())
    for match in IN_MONTH.finditer(query):
        if free(match):
            whole = _month_span(2000, _month_number(match["month"]))
            spans.append(Span(whole.start, whole.end, any_year=True))
            taken.append(match.span())
    for match in YEAR.finditer(query):
        if free(match):
            spans.append(_year_of(int(match["year"]))[0])
    spans += [r.span for r in resolve(query, today)]
    return spans


def mentions(text: str, said: date) -> list[Span]:
    """The day a message was said and every time it speaks of."""
    return [Span(said, said), *(r.span for r in resolve(text, said))]
