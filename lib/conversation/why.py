"""/why: what an answer drew on (the entries, past messages and profile note lines its prompt
held, recorded by lib/memory/provenance.py), each with buttons: Forget deletes it for real (with an
Undo button under its confirmation while lib/memory/holds.py keeps it, ten minutes), Wrong asks
for the right version and supersedes it with what the person writes next.

Every press is checked against stored state: the item belongs to a recorded answer, the presser
is the person who asked it, and the entry or message is still in that answer's memory (the
asker's own, or in a group the group's). An item already forgotten or corrected says so and
changes nothing. In a group /why is answered in the asker's private chat (a private command in
commands.py): the list names what Ash remembers.
"""

from __future__ import annotations

import json
import time

import apsw

from lib.config import Settings
from lib.conversation.replies import Asker, Button, Press, Reply
from lib.db import immediate, now_iso, one
from lib.memory import correct, forget, holds, knowledge, provenance, review, screen
from lib.memory.provenance import Answer, Source

OPEN = "why:o:"
FORGET = "why:f:"
WRONG = "why:w:"
UNDO = "why:u:"
# A correction must come soon after Wrong: a message days later is a new question, not a fix.
CORRECTION_SECONDS = 15 * 60
SNIPPET = 160

NO_RECORD = "I have no record of what that answer drew on (it may be older than this feature, or forgotten)."
NOT_AN_ANSWER = "That message is not one of my answers. Reply with /why to an answer of mine, or send /why alone."
NO_ANSWER = "I have not answered you here yet. Ask me something, then send /why."
NOTHING_USED = "That answer drew on nothing I remember: only this conversation and my instructions."
NOT_YOURS = "Only the person who asked can change what this answer drew on."
GONE = "That is already gone."
CORRECTED = "That was already corrected."
ASK = "What is right instead of “{old}”? Send it as your next message here (within 15 minutes)."
DONE_FORGET = "Forgotten."
FORGOT = (
    "Forgotten: it is in no prompt, search or screen any more. Pressed by mistake? Undo brings it back "
    "within {minutes} minutes; after that it is deleted for good."
)
UNDONE_FORGET = "Undone: I remember it again."
UNDONE = "Undone: I remember it as it was before your correction."
PENDING_CORRECTION = (
    "Your message holds someone else's words, so I saved it for review (#{id}) and changed nothing yet: "
    "keep it with /memory pending."
)


def actor(asker: Asker) -> str:
    """Who the audit log names for a change made from /why."""
    return f"{asker.actor}:why"


def _snippet(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SNIPPET else text[: SNIPPET - 1] + "…"


def _describe(conn: apsw.Connection, answer: Answer, item: Source) -> tuple[str, bool]:
    """A line about one item, and whether it can still be acted on."""
    score = f", score {item.score:.3f}" if item.score is not None else ""
    if item.kind == "knowledge":
        entry = knowledge.get(conn, item.ref_id)
        if entry is None:
            return f"Fact #{item.ref_id}: forgotten since.", False
        if entry.superseded_by is not None:
            return f"Fact #{entry.id}: replaced since by #{entry.superseded_by}.", False
        return f"Fact #{entry.id} ({entry.source}, {entry.created_at[:10]}{score}): {_snippet(entry.content)}", True
    if item.kind == "message":
        found = one(conn, "SELECT role, content, created_at FROM messages WHERE id = ?", (item.ref_id,))
        if found is None:
            return "A past message: forgotten since.", False
        who = "you" if found["role"] == "user" else "me"
        return f"Message by {who} ({found['created_at'][:10]}{score}): {_snippet(found['content'])}", True
    line = correct.note_line(conn, answer.user_id, item.note_hash)
    if line is None:
        return "A profile note: changed or removed since.", False
    return f"Profile note: {_snippet(line.removeprefix('- '))}", True


def listing(conn: apsw.Connection, answer: Answer) -> Reply:
    """The list and its buttons (two per live item; one for a message)."""
    items = provenance.sources(conn, answer.id)
    if not items:
        return Reply(NOTHING_USED)
    lines, rows = [f"That answer drew on {len(items)} thing{'s' if len(items) > 1 else ''} I remember:"], []
    for number, item in enumerate(items, start=1):
        line, live = _describe(conn, answer, item)
        lines.append(f"{number}. {line}")
        if not live:
            continue
        row = [Button(f"Forget {number}", f"{FORGET}{item.id}")]
        if item.kind != "message":
            row.append(Button(f"Wrong {number}", f"{WRONG}{item.id}"))
        rows.append(tuple(row))
    if rows:
        lines += ["", "Forget deletes it (Undo brings it back for ten minutes); Wrong lets you tell me what is right."]
    return Reply("\n".join(lines), tuple(rows))


def why_reply(conn: apsw.Connection, asker: Asker, reply_to: int | None) -> Reply:
    """/why's answer: the list for the answer replied to, or for the asker's last one here."""
    answer = provenance.find(
        conn, provider=asker.provider, chat_id=asker.chat_id, user_id=asker.user_id, reply_to=reply_to
    )
    if answer is None:
        return Reply(NOT_AN_ANSWER if reply_to is not None else NO_ANSWER)
    return listing(conn, answer)


def _may_act(answer: Answer, user_id: str) -> bool:
    """Only the person who asked acts on what their answer drew on (in a group: not the others)."""
    return answer.user_id == user_id


def press(conn: apsw.Connection, settings: Settings, asker: Asker, data: str) -> Press:
    """Act on a /why button pressed by `asker`: the 🧠 button sends the list as a new message;
    Forget and Wrong redraw it in place (the same list is pressed again and again), and Wrong
    sends the question the next message answers."""
    raw_id = data.rpartition(":")[2]
    if not raw_id.isdigit():
        return Press(GONE)
    if data.startswith(UNDO):
        return _undo_press(conn, settings, asker, int(raw_id))
    if data.startswith(OPEN):
        answer = provenance.get(conn, int(raw_id))
        if answer is None:
            return Press(NO_RECORD)
        return Press(message=listing(conn, answer)) if _may_act(answer, asker.user_id) else Press(NOT_YOURS)
    found = provenance.source(conn, int(raw_id))
    if found is None:
        return Press(GONE)
    item, answer = found
    if not _may_act(answer, asker.user_id):
        return Press(NOT_YOURS)
    if data.startswith(FORGET):
        forgotten = _forget(conn, settings, answer, item, actor(asker))
        if forgotten is None:
            return Press(GONE, listing(conn, answer))
        if not forgotten:  # a profile note line: nothing is held for Undo
            return Press(DONE_FORGET, listing(conn, answer))
        confirm = Reply(FORGOT.format(minutes=holds.UNDO_SECONDS // 60), ((Button("Undo", f"{UNDO}{forgotten}"),),))
        return Press(DONE_FORGET, listing(conn, answer), message=confirm)
    line, live = _describe(conn, answer, item)
    if not live:
        return Press(CORRECTED if "replaced" in line else GONE, listing(conn, answer))
    _open_correction(conn, asker, item_id=item.id)
    return Press("Tell me what is right.", message=Reply(ASK.format(old=_old_text(conn, answer, item))))


def _old_text(conn: apsw.Connection, answer: Answer, item: Source) -> str:
    if item.kind == "knowledge":
        entry = knowledge.get(conn, item.ref_id)
        return _snippet(entry.content) if entry else ""
    line = correct.note_line(conn, answer.user_id, item.note_hash) or ""
    return _snippet(line.removeprefix("- "))


def _forget(conn: apsw.Connection, settings: Settings, answer: Answer, item: Source, who: str) -> int | None:
    """Delete the item for real: the forget's audit id when what it deleted is held for Undo
    (lib/memory/holds.py), 0 for a note line (nothing to hold), None when it was already gone (or
    never the answer's to delete)."""
    if item.kind == "knowledge":
        entry = knowledge.get(conn, item.ref_id)
        if entry is None:
            return None
        owner = answer.memory_owner
        if entry.owner_user_id != owner and not (entry.is_global and settings.config.owner is not None):
            return None
        # Its note line, if extraction kept one, goes with it (lib/memory/forget.py).
        done = forget.forget_memory(
            conn,
            settings,
            owner,
            entry.id,
            who,
            include_global=str(settings.config.owner) == answer.user_id,
            hold_until_undo=time.time(),
        )
        return done["audit_id"] if done is not None else None
    if item.kind == "message":
        done = forget.forget_message(conn, settings, answer.memory_owner, item.ref_id, who, hold_until_undo=time.time())
        return done["audit_id"] if done is not None else None
    line = correct.note_line(conn, answer.user_id, item.note_hash)
    if line is None:
        return None
    forgotten = correct.forget_note(conn, answer.user_id, item.note_hash, who)
    entry_id = correct.active_entry_saying(conn, answer.user_id, line)
    if entry_id is not None:
        forget.forget_memory(conn, settings, answer.user_id, entry_id, who)
    return 0 if forgotten else None


OPEN_CORRECTION_SQL = """
SELECT id, item_id FROM memory_corrections
WHERE provider = :provider AND chat_id = :chat_id AND user_id = :user_id AND status = 'open' AND expires_at > :now
ORDER BY id DESC LIMIT 1
"""


def _open_correction(conn: apsw.Connection, asker: Asker, *, item_id: int) -> None:
    provider, chat_id, user_id = asker.provider, asker.chat_id, asker.user_id
    with immediate(conn):
        # One question at a time: a newer Wrong replaces an unanswered one.
        conn.execute(
            "UPDATE memory_corrections SET status = 'dropped' WHERE provider = ? AND chat_id = ? AND user_id = ? "
            "AND status = 'open'",
            (provider, chat_id, user_id),
        )
        conn.execute(
            "INSERT INTO memory_corrections (provider, chat_id, user_id, item_id, created_at, expires_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (provider, chat_id, user_id, item_id, now_iso(), time.time() + CORRECTION_SECONDS),
        )


def correction_reply(
    conn: apsw.Connection, settings: Settings, asker: Asker, text: str, outside: tuple[str, ...] = ()
) -> Reply | None:
    """After Wrong, the person's next message here is the right version: stored, and answered
    with what changed; None when no correction was asked for (the message is an ordinary one).
    A message holding outside content (a forward, someone else's quoted words) is stored pending
    review and replaces nothing until the person keeps it (lib/memory/review.py)."""
    where = {"provider": asker.provider, "chat_id": asker.chat_id, "user_id": asker.user_id}
    found = one(conn, OPEN_CORRECTION_SQL, {**where, "now": time.time()})
    if not found:
        return None
    try:
        said = _apply_correction(conn, settings, found["id"], text, asker, outside)
    except screen.Refused as refused:
        return Reply(str(refused))
    # The correction can be taken back: the button names the supersession it made.
    change = one(conn, LAST_CORRECTION_SQL, {"actor": actor(asker)}) if said.startswith("Thanks, corrected") else None
    return Reply(said, ((Button("Undo", f"{UNDO}{change['id']}"),),) if change else ())


def _apply_correction(
    conn: apsw.Connection, settings: Settings, correction_id: int, text: str, asker: Asker, outside: tuple[str, ...]
) -> str:
    """Store what the person says is right (the message after Wrong); returns the reply."""
    with immediate(conn):
        conn.execute("UPDATE memory_corrections SET status = 'done' WHERE id = ? AND status = 'open'", (correction_id,))
        if not conn.changes():
            return GONE
        row = one(conn, "SELECT item_id FROM memory_corrections WHERE id = ?", (correction_id,))
        found = provenance.source(conn, row["item_id"]) if row else None
        if found is None:
            return GONE
        item, answer = found
        who = actor(asker)
        if outside:
            return _pending_correction(conn, settings, answer, item, text, who, outside)
        if item.kind == "knowledge":
            new_id = correct.correct_entry(conn, settings, item.ref_id, text, actor=who, asked_by=asker.user_id)
            if new_id is None:
                return CORRECTED
            return f"Thanks, corrected: I now remember “{_snippet(text)}” (#{new_id}, replacing #{item.ref_id})."
        line = correct.note_line(conn, answer.user_id, item.note_hash)
        if line is None:
            return GONE
        entry_id = correct.active_entry_saying(conn, answer.user_id, line)
        if entry_id is not None:
            correct.correct_entry(conn, settings, entry_id, text, actor=who, asked_by=asker.user_id)
        else:
            correct.replace_note(conn, answer.user_id, line, " ".join(text.split()), who)
        return f"Thanks, corrected: my notes about you now say “{_snippet(text)}”."


LAST_CORRECTION_SQL = """
SELECT id FROM audit_log WHERE actor = :actor AND action IN ('memory_supersede', 'note_replace')
ORDER BY id DESC LIMIT 1
"""


def _undo_press(conn: apsw.Connection, settings: Settings, asker: Asker, audit_id: int) -> Press:
    """Undo pressed under a correction or a Forget's confirmation: only its maker, once; the old
    fact is current again, or what was forgotten is back while its hold lasts."""
    from lib.memory import undo

    row = one(conn, "SELECT actor, action, detail FROM audit_log WHERE id = ?", (audit_id,))
    if row is None or row["actor"] != actor(asker):
        return Press(NOT_YOURS)
    if row["action"] in undo.HELD:
        done = undo.undo(conn, settings, audit_id, actor=actor(asker))
        if not done.ok:
            return Press("Too late: it was deleted for good." if "for real" in done.message else done.message[:190])
        return Press("Undone.", Reply(UNDONE_FORGET))
    if row["action"] == "note_replace":
        return Press("A changed note line cannot be undone here; send /why and correct it again.")
    new_id = json.loads(row["detail"])["by"]
    new = knowledge.get(conn, new_id)
    done = undo.undo(conn, settings, audit_id, actor=actor(asker))
    if not done.ok:
        return Press(done.message[:190])
    if new is not None:
        added = undo.last_change(conn, new_id, "memory_add")
        if added is not None:
            undo.undo(conn, settings, added, actor=actor(asker))
        old = knowledge.get(conn, json.loads(row["detail"])["superseded"])
        if old is not None and old.owner_user_id is not None:
            correct.replace_note(conn, old.owner_user_id, f"- {new.content}", old.content, actor(asker))
    return Press("Undone.", Reply(UNDONE))


def _pending_correction(
    conn: apsw.Connection, settings: Settings, answer: Answer, item: Source, text: str, who: str, outside
) -> str:
    """A correction that came with outside content: kept for review, replacing nothing yet."""
    new_id = knowledge.add(
        conn,
        settings,
        " ".join(text.split()),
        owner_user_id=answer.memory_owner,
        source="correction",
        actor=who,
        because={"corrects": item.ref_id if item.kind == "knowledge" else None, "asked_by": answer.user_id},
        origin=review.origin_of(outside),
        status="pending",
    )
    return PENDING_CORRECTION.format(id=new_id)


def sources_button(sources_id: int, count: int) -> Button:
    """The small 🧠 N button under an answer that drew on memory: it opens the /why list."""
    return Button(f"🧠 {count}", f"{OPEN}{sources_id}")
