"""A question about the asker themself: their own words first, and their newest word on it.

The kinds of miss this answers (BEAM assistant chats, bench/locomo.py, read by hand):

- Between a person and Ash, the person's facts are in their own turns ("I'm going to Foot Locker
  at 4 PM next Saturday, is that a good idea?"); Ash's long answers around them repeat the same
  words many times over, and a question in the first person ("What time should I plan to visit
  Foot Locker?") found the answers first. "I", "my", "me" name the person who asks, as a first
  name names a speaker (conversation.SPEAKER_BONUS): the user's turns get OWN_TURN_BONUS.
  Questions about two other people (LoCoMo: "What did Caroline research?") never say "I", so
  nothing changes there, nor for a question about what "we" discussed, whose answer includes
  Ash's advice ("a summary of the options we've talked about"). "I'm going at 4 PM, is that
  ok?" asks, but it is where the fact is: the question step of
  lib/memory/search/conversation.py leaves it whole, as Ash, not a person, replies to it.
- A question about what the asker said ("the order in which I brought up different aspects of my
  plans with Douglas throughout our conversations", "How many shoe sizes have I mentioned?",
  "What amount did I say I pay?") is answered by the person's own turns alone: in BEAM's 20 such
  questions (all six chats) every evidence turn is the user's, while Ash's replies around them
  repeat the same words at length. "Our conversations" there names where it was said, not a
  subject shared with Ash, so the rule for "we" above does not hold it back; and the user's
  turns then all come before Ash's (SAID_FIRST), not just 0.3 above them. Measured over the kept
  indexes (docs/memory/retrieval.md, "Ablation"): BEAM R@10 dev 0.581 -> 0.591, held out 0.640 ->
  0.665, multi-session questions 0.303 -> 0.359; LoCoMo asks no question in the first person
  and does not move. Only "our conversations" taken as a place: 0.588 / 0.652; a bonus of 0.6
  instead of first place: 0.591 / 0.660.
- A person's values change ("my budget is $500" ... "I've increased my budget to $650"), and the
  question asks for the value now. Both turns share the question's words; the older one often
  matched better. Among the user's candidate turns that say the same asked-about things (at
  least NEWER_MIN_SHARED of the question's words, or all it matched when fewer), a newer one is
  put just above the older ones, unless the question asks about the past ("first",
  "originally", "did", "in April 2023"). A bonus (+0.2) was not enough: the older turn often
  says more of the question's words ("my annual budget" against "raised the budget"). A value
  changes whoever the question names: "How long does the probate process take?", "What is the
  budget allocated for prototype refinement?" ask for the newest word as "my budget" does. Not a
  question about what "we" discussed ("a summary of how my sneaker preferences developed over
  our conversations"), which wants every turn in its place.
"""

from __future__ import annotations

import re
from datetime import date

from lib.memory.search import when
from lib.memory.search.words import stems

# As much as a question naming a speaker gives that speaker's turns (conversation.SPEAKER_BONUS).
OWN_TURN_BONUS = 0.3
NEWEST_FIRST = True
# How far above the turn it updates an update is put (a tie-breaker's size, not a bonus).
NEWER_MARGIN = 0.01
NEWER_MIN_SHARED = 2
# The newest statement is looked for among this many of the best user turns.
NEWER_AMONG = 10
ASKER_ROLE = "user"
# For a question about what the asker said, the user's turns before all of Ash's.
SAID_FIRST = True

# "I" only as a capital (an "i" is a typo or a list marker), the rest in any case.
_FIRST_PERSON = re.compile(r"(?<![\w'])(?:I(?:'m|'ve|'d|'ll)?|(?i:me|my|mine|myself))(?![\w'])")
_TOGETHER = re.compile(r"\b(we|we've|we'd|us|our|ours)\b", re.IGNORECASE)
# "I brought up", "I've mentioned", "have I mentioned", "did I say", "I told you".
_SAID_BY_THE_ASKER = re.compile(
    r"\b(?:I(?:'ve|\s+have)?|have\s+I|did\s+I)\s+"
    r"(?:brought\s+up|bring\s+up|mention(?:ed)?|told\s+you|tell\s+you|said|say|shared?|raised?|ask(?:ed)?)\b"
)
_ABOUT_THE_PAST = re.compile(
    r"\b(first|originally|original|initially|initial|before|previous|previously|earlier|used to|at the start|"
    r"old|change[ds]?|changing|over time|history|order|did|was|were)\b",
    re.IGNORECASE,
)


def about_the_asker(query: str) -> bool:
    """The question speaks of the person asking ("I", "my", "me"), not of what they and Ash said
    together ("we", "our conversations": Ash's advice is part of the answer then), or asks what
    the person said ("the order in which I brought up ... throughout our conversations")."""
    if asks_what_the_asker_said(query):
        return True
    return bool(_FIRST_PERSON.search(query)) and not _TOGETHER.search(query)


def asks_what_the_asker_said(query: str) -> bool:
    """The question asks what the person said ("I brought up", "have I mentioned", "did I say")."""
    return bool(_SAID_BY_THE_ASKER.search(query))


def prefer_askers_turns(scores: dict[int, float], by_id: dict[int, dict], query: str) -> dict[int, float]:
    """OWN_TURN_BONUS for the user's turns when the question is about the asker; when it asks
    what the asker said, the user's turns before every one of Ash's."""
    if SAID_FIRST and asks_what_the_asker_said(query):
        # The best score plus one puts every user turn above all of Ash's (a discount takes at
        # most 0.2 off a score), and the user's turns keep their order among themselves.
        lift = max(scores.values(), default=0.0) + 1.0
        return {ref: score + lift * (by_id[ref]["role"] == ASKER_ROLE) for ref, score in scores.items()}
    if not OWN_TURN_BONUS or not about_the_asker(query):
        return scores
    return {ref: score + OWN_TURN_BONUS * (by_id[ref]["role"] == ASKER_ROLE) for ref, score in scores.items()}


def asks_about_now(query: str, today: date) -> bool:
    """A question about the present: not in the past tense, naming no past ("originally",
    "before") and no time ("in April 2023": lib/memory/search/when.py), and not about what "we"
    discussed unless it asks what the asker said."""
    if _TOGETHER.search(query) and not asks_what_the_asker_said(query):
        return False
    return not _ABOUT_THE_PAST.search(query) and not when.spans_in_query(query, today)


def prefer_newest_statement(
    scores: dict[int, float], by_id: dict[int, dict], query: str, today: date
) -> dict[int, float]:
    """A user turn that speaks again of what an older candidate user turn said about the
    question's subject is put just above it (the update outranks the value it replaced)."""
    if not NEWEST_FIRST or not asks_about_now(query, today):
        return scores
    wanted = stems(query)
    best = sorted((r for r in scores if by_id[r]["role"] == ASKER_ROLE), key=lambda r: -scores[r])[:NEWER_AMONG]
    said = {ref: wanted & stems(by_id[ref]["content"]) for ref in best}
    adjusted = dict(scores)
    for ref in sorted(best, key=lambda r: by_id[r]["created_at"]):  # oldest first: a chain of updates
        older = [
            o
            for o in best
            if by_id[o]["created_at"] < by_id[ref]["created_at"]
            and len(said[ref] & said[o]) >= min(NEWER_MIN_SHARED, len(said[o]))
            and said[ref] & said[o]
        ]
        if older:
            adjusted[ref] = max(adjusted[ref], max(adjusted[o] for o in older) + NEWER_MARGIN)
    return adjusted
