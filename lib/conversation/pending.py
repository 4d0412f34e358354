"""/memory pending: the memories written while a conversation held outside content, each with Keep
and Discard buttons (lib/memory/review.py).

A person reviews their own pending entries; the owner (config `owner`) also reviews every
group's, and in a group only the owner may ask (the answer goes to their private chat: /memory is
a private command). Every press is checked against stored state: the entry is still pending,
and the presser may review it. A decided entry says so and changes nothing.

Consolidation's proposals (lib/memory/consolidate.py) follow, for whoever may review every entry
they touch: Merge / Keep both under a duplicate, Apply / Skip under a contradicted or stale fact.
"""

from __future__ import annotations

import apsw

from lib.config import Settings
from lib.conversation.replies import Asker, Button, Press, Reply
from lib.memory import knowledge, review
from lib.memory.scope import is_group, is_group_owner

KEEP = "mem:k:"
DISCARD = "mem:d:"
# Consolidation's proposals (lib/memory/consolidate.py): apply one (merge a duplicate), or skip it
# (keep both).
MERGE = "mem:m:"
BOTH = "mem:b:"
# Every proposal the presser may review, applied at once (the daily review message's last button).
ALL = "mem:all"
# The buttons under a proposal, by its kind: (apply, skip), and what a press of each answers.
LABELS = {"merge": ("Merge", "Keep both")}
OTHER_LABELS = ("Apply", "Skip")
DONE = {"merge": ("Merged.", "Both kept.")}
OTHER_DONE = ("Applied.", "Skipped.")
PROPOSALS = "Consolidation proposes these changes to what I remember; nothing changes until you say so:"
SNIPPET = 160
# Entries shown at once (two buttons each: Telegram allows 100 per message).
PAGE = 20

NOTHING = "Nothing waits for your review."
OWNER_ONLY = "Only the owner reviews what this group's memory holds."
NOT_YOURS = "This memory is not yours to review."
DECIDED = "That one was decided already."
HEADER = (
    "{n} memor{ies} wait for your review. Each was written while a conversation held outside content "
    "(a page, a file, a forward, someone else's words), and none is used until you keep it:"
)


def _is_owner(settings: Settings, user_id: str) -> bool:
    return settings.config.owner is not None and str(settings.config.owner) == user_id


def _may_review(settings: Settings, entry: knowledge.Knowledge, user_id: str) -> bool:
    if entry.owner_user_id == user_id:
        return True
    return _is_owner(settings, user_id) and (entry.is_global or is_group_owner(entry.owner_user_id))


def _reviewable(conn: apsw.Connection, settings: Settings, user_id: str) -> list[knowledge.Knowledge]:
    everyone = review.pending(conn, None, limit=5000)
    return [e for e in everyone if _may_review(settings, e, user_id)]


def _snippet(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SNIPPET else text[: SNIPPET - 1] + "…"


def listing(conn: apsw.Connection, settings: Settings, user_id: str, *, limit: int = PAGE) -> Reply:
    """The pending entries `user_id` may review, oldest first, with Keep and Discard under each
    (the first `limit`; the rest follow as these are decided)."""
    waiting = _reviewable(conn, settings, user_id)
    if not waiting:
        return Reply(NOTHING)
    entries = waiting[:limit]
    lines = [HEADER.format(n=len(waiting), ies="y" if len(waiting) == 1 else "ies")]
    rows = []
    for number, entry in enumerate(entries, start=1):
        where = " in a group" if is_group_owner(entry.owner_user_id) else ""
        lines.append(
            f"{number}. #{entry.id} (from {entry.origin}{where}, {entry.created_at[:10]}): {_snippet(entry.content)}"
        )
        rows.append(
            (Button(f"Keep {number}", f"{KEEP}{entry.id}"), Button(f"Discard {number}", f"{DISCARD}{entry.id}"))
        )
    if len(waiting) > len(entries):
        lines.append(f"(The first {len(entries)}; the others follow as you decide these.)")
    return Reply("\n".join(lines), tuple(rows))


def pending_reply(conn: apsw.Connection, settings: Settings, asker: Asker) -> Reply:
    """/memory pending's answer: what waits for review, then what consolidation proposes."""
    if is_group(asker.chat_type) and not _is_owner(settings, asker.user_id):
        return Reply(OWNER_ONLY)
    waiting = listing(conn, settings, asker.user_id)
    proposed = proposals(conn, settings, asker.user_id)
    if proposed is None:
        return waiting
    if not waiting.buttons:
        return proposed
    return Reply(f"{waiting.text}\n\n{proposed.text}", waiting.buttons + proposed.buttons)


def _proposals_for(conn: apsw.Connection, settings: Settings, user_id: str) -> list[dict]:
    from lib.memory import consolidate

    found = []
    for proposal in consolidate.open_proposals(conn):
        ids = [i for i in (proposal["keep_id"], proposal["drop_id"]) if i is not None]
        entries = [knowledge.get(conn, i) for i in ids]
        if all(e is not None and _may_review(settings, e, user_id) for e in entries):
            found.append(proposal)
    return found[:PAGE]


def proposals(conn: apsw.Connection, settings: Settings, user_id: str) -> Reply | None:
    """What consolidation proposes to change, each described, with Merge / Keep both under a
    duplicate and Apply / Skip under a contradicted or stale fact; None when nothing waits."""
    from lib.memory import consolidate

    found = _proposals_for(conn, settings, user_id)
    if not found:
        return None
    lines, rows = [PROPOSALS], []
    for number, proposal in enumerate(found, start=1):
        head, *entries = consolidate.describe(conn, proposal)
        lines.append(f"M{number}. {head}")
        lines += [f"    {line}" for line in entries]
        apply_label, skip_label = LABELS.get(proposal["kind"], OTHER_LABELS)
        rows.append(
            (
                Button(f"{apply_label} M{number}", f"{MERGE}{proposal['id']}"),
                Button(f"{skip_label} M{number}", f"{BOTH}{proposal['id']}"),
            )
        )
    return Reply("\n".join(lines), tuple(rows))


REVIEW_HEADER = (
    "Once a day I look over what I remember for facts said twice, contradicted since or out of date. "
    "Each change can be undone later (ash memory undo)."
)


def review_message(conn: apsw.Connection, settings: Settings, user_id: str) -> Reply | None:
    """The message consolidation's daily pass sends by itself: the open proposals `user_id` may
    review, with a button for each and Apply all; None when none is left."""
    found = proposals(conn, settings, user_id)
    if found is None:
        return None
    return Reply(f"{REVIEW_HEADER}\n\n{found.text}", (*found.buttons, (Button("Apply all", ALL),)))


def waiting_line(conn: apsw.Connection, settings: Settings, user_id: str) -> str:
    """A line for /memory when something waits for review ("" otherwise)."""
    count = len(_reviewable(conn, settings, user_id))
    return f"\n\n{count} more wait for your review: /memory pending" if count else ""


def _proposal_press(conn: apsw.Connection, settings: Settings, asker: Asker, data: str) -> Press:
    from lib.memory import consolidate

    raw_id = data.rpartition(":")[2]
    mine = {p["id"]: p for p in _proposals_for(conn, settings, asker.user_id)}
    if data == ALL:
        who = f"{asker.actor}:review"
        done = sum(consolidate.apply(conn, settings, proposal_id, actor=who) is None for proposal_id in mine)
        return Press(f"Applied {done} of {len(mine)}." if mine else DECIDED, pending_reply(conn, settings, asker))
    if not raw_id.isdigit() or int(raw_id) not in mine:
        return Press(DECIDED, pending_reply(conn, settings, asker))
    applied, skipped = DONE.get(mine[int(raw_id)]["kind"], OTHER_DONE)
    if data.startswith(BOTH):
        consolidate.skip(conn, int(raw_id))
        return Press(skipped, pending_reply(conn, settings, asker))
    why_not = consolidate.apply(conn, settings, int(raw_id), actor=f"{asker.actor}:review")
    return Press(why_not[:190] if why_not else applied, pending_reply(conn, settings, asker))


def press(conn: apsw.Connection, settings: Settings, asker: Asker, data: str) -> Press:
    """Keep or Discard (or a proposal's button, or Apply all) pressed by `asker`: decided once, by
    someone who may review it."""
    if data.startswith((MERGE, BOTH)) or data == ALL:
        return _proposal_press(conn, settings, asker, data)
    raw_id = data.rpartition(":")[2]
    entry = knowledge.get(conn, int(raw_id)) if raw_id.isdigit() else None
    if entry is None:
        return Press("That memory is gone.", pending_reply(conn, settings, asker))
    if not _may_review(settings, entry, asker.user_id):
        return Press(NOT_YOURS)
    decide = review.keep if data.startswith(KEEP) else review.discard
    done = decide(conn, settings, entry.id, actor=f"{asker.actor}:review")
    if done is None:
        return Press(DECIDED, pending_reply(conn, settings, asker))
    return Press("Kept." if data.startswith(KEEP) else "Discarded.", pending_reply(conn, settings, asker))
