"""Noticing events in what a person writes, by rules (no model call): "interview Thursday at 10",
"flight to Lisbon on Friday", "dentist tomorrow 3pm", "exam next week"; and a later change,
"the interview moved to Friday", or cancellation, "dentist cancelled".

A message is read one sentence at a time. A sentence names an event when it holds one of the
event words below and a coming day or time, and is not a question, a request to Ash ("remind
me...", which the schedule tool handles), a habit ("every Thursday") or about the past. Days
and times are read in the person's zone with lib/schedule/times.py's rules. An hour said without
am or pm is read as people mean it: 1 to 6 is afternoon, and 7 to 11 is evening for an evening
event (a date, a concert) or "tonight", else morning. "next week" is the Friday of next week,
"this weekend" the Sunday; a day without a time is an all-day event.

Known limits (bench/followups.py measures them on a committed labelled set): only English, only
the event words listed, one event a message.
"""

from __future__ import annotations

import re
import zoneinfo
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from lib.errors import ScheduleError
from lib.schedule.times import CLOCK, WEEKDAYS, clock_of, local_time, to_instant

EVENT, MOVE, CANCEL = "event", "move", "cancel"

# Event words and the one each stands for; several words may stand for one event.
_WORDS = {
    "interview": "interview",
    "interviews": "interview",
    "flight": "flight",
    "fly": "flight",
    "flying": "flight",
    "dentist": "dentist",
    "orthodontist": "dentist",
    "doctor": "doctor",
    "doctor's": "doctor",
    "physio": "doctor",
    "dermatologist": "doctor",
    "cardiologist": "doctor",
    "vet": "vet",
    "exam": "exam",
    "exams": "exam",
    "midterm": "exam",
    "test": "test",
    "appointment": "appointment",
    "presentation": "presentation",
    "presenting": "presentation",
    "meeting": "meeting",
    "surgery": "surgery",
    "operation": "surgery",
    "concert": "concert",
    "gig": "concert",
    "marathon": "marathon",
    "race": "race",
    "defense": "defense",
    "defence": "defense",
    "wedding": "wedding",
    "review": "review",
    "demo": "demo",
    "recital": "recital",
    "audition": "audition",
    "hearing": "hearing",
    "scan": "scan",
    "mri": "scan",
    "checkup": "checkup",
    "check-up": "checkup",
    "hackathon": "hackathon",
    "haircut": "haircut",
    "offsite": "offsite",
    "competition": "competition",
    "tournament": "competition",
    "pitch": "pitch",
    "moving": "move",
    "rehearsal": "rehearsal",
    "conference": "conference",
    "workshop": "workshop",
    "graduation": "graduation",
    "ceremony": "ceremony",
    "funeral": "funeral",
    "trip": "trip",
    "match": "match",
    # Words that are also verbs or everyday words: they name an event only after a determiner or
    # a possessive ("a date", "my sister's party", "the talk") or before "with" ("call with").
    "date": "date",
    "call": "call",
    "talk": "talk",
    "party": "party",
    "play": "play",
    "meet": "meet",
    "train": "train",
    "session": "session",
    "game": "game",
    "coffee": "coffee",
    "lunch": "lunch",
    "dinner": "dinner",
    "class": "class",
}
_LOOSE = frozenset(
    {"date", "call", "talk", "party", "play", "meet", "train", "session", "game", "coffee", "lunch", "dinner", "class"}
)
_PAIRS = {"first day": "first day", "first date": "date", "day one": "first day"}
_EVENING = frozenset({"date", "concert", "party", "play", "dinner", "game", "match", "recital", "rehearsal"})
_DETERMINERS = frozenset({"a", "an", "the", "my", "our", "his", "her", "their", "your", "first", "second", "final"})
_SKIP_WORDS = _DETERMINERS | {"have", "has", "got", "i", "i've", "we", "is", "on", "at", "to", "big", "for", "with"}

WORD = re.compile(r"[a-z0-9]+(?:['-][a-z0-9]+)*")
SHOWN_WORD = re.compile(WORD.pattern, re.IGNORECASE)
SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
QUESTION_START = frozenset(
    [
        "what",
        "when",
        "where",
        "who",
        "why",
        "how",
        "is",
        "are",
        "can",
        "could",
        "should",
        "would",
        "will",
        "do",
        "does",
        "did",
        "which",
        "whats",
        "what's",
    ]
)
REQUEST_START = frozenset(
    [
        "remind",
        "set",
        "schedule",
        "cancel",
        "tell",
        "write",
        "translate",
        "recommend",
        "convert",
        "fix",
        "play",
        "summarise",
        "summarize",
        "explain",
        "compare",
        "draft",
        "find",
        "search",
        "show",
        "list",
    ]
)
HABIT = re.compile(r"\b(?:every|usually|always|each|weekly|daily)\b")
PAST = re.compile(r"\b(?:yesterday|last (?:week|night|year|month|time)|ago|went|was|were|had|did|passed|landed)\b")
CHANGE_PAST = re.compile(r"\b(?:yesterday|last (?:week|night|year|month|time)|ago)\b")
CANCELLED = re.compile(
    r"\b(?:cancell?ed|cancels|called off|(?:is|are|'s) off|not (?:doing|going to|going)\b.*\banymore|after all)\b"
)
POSTPONED_NO_DAY = re.compile(r"\b(?:postponed|delayed|put off)\b")
MOVED = re.compile(
    r"\b(?:moved|moves|pushed(?: back)?|postponed|rescheduled|delayed|brought forward|changed|is now|now on)\b"
)

_WEEKDAY = "|".join(WEEKDAYS)
DAY = re.compile(
    rf"\b(?:(?P<rel>today|tonight|tomorrow)|(?P<next>next|this)\s+(?P<nday>{_WEEKDAY})|(?P<day>{_WEEKDAY})"
    r"|(?P<nweek>next week)|(?:this |the )?(?P<weekend>weekend)"
    r"|the (?P<nth>\d{1,2})(?:st|nd|rd|th))\b"
)
AT_CLOCK = re.compile(rf"\bat\s+(?:{CLOCK})\b")
BARE_CLOCK = re.compile(
    r"(?P<word>\bnoon\b)|(?<![\w:.])(?P<hour>\d{1,2})(?:(?:[:.](?P<minute>\d{2}))\s*(?P<half>am|pm|a\.m\.|p\.m\.)?"
    r"|\s*(?P<half2>am|pm|a\.m\.|p\.m\.))(?![\w:])"
)
# After this many days an event is not noticed: "on the 12th" is this month or the next.
HORIZON_DAYS = 62


@dataclass(frozen=True)
class Noticed:
    """What a message says about an event: EVENT (a coming one), MOVE (to `day` and/or `clock`)
    or CANCEL; `event` in a few words, `names` the event words it goes by."""

    what: str
    event: str
    names: frozenset[str]
    day: date | None = None
    clock: time | None = None

    def starts_at(self, tz: zoneinfo.ZoneInfo, day: date | None = None) -> float:
        """When the event starts (an all-day one: at the start of its day), as Unix seconds."""
        return to_instant(datetime.combine(day or self.day, self.clock or time(0)), tz)


def event_names(text: str) -> frozenset[str]:
    """The events a text names ("job interview" -> {"interview"})."""
    return frozenset(name for name, _ in _names(WORD.findall(text.lower())))


def _names(words: list[str]) -> list[tuple[str, int]]:
    """(event, index of its word) for each event word, loose ones only where they name an event."""
    found = []
    for i, word in enumerate(words):
        pair = f"{words[i - 1]} {word}" if i else ""
        if pair in _PAIRS:
            found.append((_PAIRS[pair], i))
            continue
        name = _WORDS.get(word)
        if name is None:
            continue
        if word in _LOOSE:
            before = words[max(0, i - 3) : i]
            after = words[i + 1] if i + 1 < len(words) else ""
            if not (any(w in _DETERMINERS or w.endswith("'s") for w in before) or after == "with"):
                continue
        found.append((name, i))
    return found


def _phrase(words: list[str], at: int) -> str:
    """The event in a few words: its word, the word before it unless that is a filler, and
    "to Lisbon" or "with Sam" after it."""
    before = words[at - 1] if at else ""
    start = at - 1 if before and before.lower() not in _SKIP_WORDS and not any(c.isdigit() for c in before) else at
    end = at + 1
    if end + 1 < len(words) and words[end].lower() in ("to", "with"):
        end += 3 if words[end + 1].lower() in _DETERMINERS and end + 2 < len(words) else 2
    return " ".join(words[start:end])


def _clock(sentence: str, names: frozenset[str], tonight: bool) -> time | None:
    """The time of day a sentence gives, with the hour read as people mean it."""
    found = AT_CLOCK.search(sentence)
    if found is None:
        found = next((m for m in BARE_CLOCK.finditer(sentence) if m["word"] or m["minute"] or m["half2"]), None)
    if found is None:
        return None
    half = found.groupdict().get("half2")
    try:
        at = clock_of(found) if not half else datetime.strptime(f"{found['hour']} {half.replace('.', '')}", "%I %p")
    except (ScheduleError, ValueError):
        return None
    at = at if isinstance(at, time) else at.time()
    said_half = found["half"] or half or found["word"] or (found["minute"] and at.hour > 12)
    if not said_half and 1 <= at.hour <= 6:
        return at.replace(hour=at.hour + 12)
    evening = bool(names & _EVENING) or tonight or "evening" in sentence
    if not said_half and 7 <= at.hour <= 11 and evening:
        return at.replace(hour=at.hour + 12)
    return at


def _day(found: re.Match, today: date) -> date | None:
    """The date a DAY match names, counted from `today`."""
    if found["rel"]:
        return today + timedelta(days=1 if found["rel"] == "tomorrow" else 0)
    if found["nweek"]:
        return today + timedelta(days=7 - today.weekday() + 4)
    if found["weekend"]:
        return today + timedelta(days=(6 - today.weekday()) % 7)
    if found["nth"]:
        day = int(found["nth"])
        for months in range(3):
            year, month = divmod(today.month - 1 + months, 12)
            try:
                candidate = date(today.year + year, month + 1, day)
            except ValueError:
                continue
            if candidate >= today:
                return candidate
        return None
    if found["next"] == "next":
        return today + timedelta(days=7 - today.weekday() + WEEKDAYS.index(found["nday"]))
    weekday = WEEKDAYS.index(found["nday"] or found["day"])
    ahead = (weekday - today.weekday()) % 7
    return today + timedelta(days=ahead or 7)


def _when(sentence: str, names: frozenset[str], today: date) -> tuple[date | None, time | None]:
    found = DAY.search(sentence)
    tonight = found is not None and found["rel"] == "tonight"
    return (_day(found, today) if found else None), _clock(sentence, names, tonight)


def _sentence(said: str, tz: zoneinfo.ZoneInfo, now: float) -> Noticed | None:
    sentence = said.lower()
    words = WORD.findall(sentence)
    if not words or words[0] in QUESTION_START or words[0] in REQUEST_START or HABIT.search(sentence):
        return None
    found = _names(words)
    if not found:
        return None
    names = frozenset(name for name, _ in found)
    shown = SHOWN_WORD.findall(said)
    event = _phrase(shown if len(shown) == len(words) else words, found[0][1])
    today = local_time(now, tz).date()
    if CANCELLED.search(sentence) and not CHANGE_PAST.search(sentence):
        return Noticed(CANCEL, event, names)
    moved = MOVED.search(sentence)
    if moved is not None and not CHANGE_PAST.search(sentence):
        day, clock = _when(sentence[moved.end() :], names, today)
        if day is not None or clock is not None:
            return Noticed(MOVE, event, names, day, clock)
        if POSTPONED_NO_DAY.search(sentence):
            return Noticed(CANCEL, event, names)  # put off to no day said: no follow-up for now
        return None
    if PAST.search(sentence):
        return None
    day, clock = _when(sentence, names, today)
    if day is None and clock is None:
        return None
    if day is None:  # "interview at 10": its next occurrence
        day = today if to_instant(datetime.combine(today, clock), tz) > now else today + timedelta(days=1)
    if (day - today).days > HORIZON_DAYS:
        return None
    noticed = Noticed(EVENT, event, names, day, clock)
    if clock is not None and noticed.starts_at(tz) <= now:
        return None
    return noticed


def notice(text: str, tz: zoneinfo.ZoneInfo, now: float) -> Noticed | None:
    """The event, change or cancellation a message tells of, read at `now` in `tz`; None: none."""
    for sentence in SENTENCE.split(text.strip()):
        noticed = _sentence(sentence, tz, now)
        if noticed is not None:
            return noticed
    return None
