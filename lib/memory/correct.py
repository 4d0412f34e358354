"""Corrections a person makes to what Ash remembers (from /why): a fact that is wrong is
superseded by what they say is right; a profile note line is replaced or removed.

Extraction keeps a fact both as an entry and as a note line (lib/memory/extraction.py), so a
correction or deletion of one also applies to the other: otherwise the old fact would still
reach the next prompt. Every change is audited by who made it; no text goes into the log.
"""

from __future__ import annotations

import apsw

from lib.config import Settings
from lib.db import immediate
from lib.memory import knowledge, store
from lib.memory.provenance import note_hash, note_lines


def _same_fact(line: str, content: str) -> bool:
    return " ".join(line.removeprefix("- ").split()).casefold() == " ".join(content.split()).casefold()


def note_line(conn: apsw.Connection, user_id: str, line_hash: str) -> str | None:
    """The current note line of `user_id` recorded under `line_hash`, or None (changed since)."""
    profile = store.get_profile(conn, user_id)
    for line in note_lines(profile.notes if profile else ""):
        if note_hash(line) == line_hash:
            return line
    return None


def _rewrite_notes(conn: apsw.Connection, user_id: str, keep, actor: str, action: str) -> bool:
    """Rewrite the notes line by line (`keep(line)` returns the new line, or None to drop it)."""
    profile = store.get_profile(conn, user_id)
    if profile is None:
        return False
    old = profile.notes.splitlines()
    new = [changed for line in old if (changed := keep(line) if line.strip() else line) is not None]
    if new == old:
        return False
    store.set_notes(conn, user_id, "\n".join(new).strip())
    store.audit(conn, actor, action, user_id, lines_before=len(old), lines_after=len(new))
    return True


def forget_note(conn: apsw.Connection, user_id: str, line_hash: str, actor: str) -> bool:
    """Remove one line of the person's profile notes; False when it is no longer there."""
    with immediate(conn):
        line = note_line(conn, user_id, line_hash)
        if line is None:
            return False
        return _rewrite_notes(conn, user_id, lambda kept: None if kept.strip() == line else kept, actor, "note_forget")


def forget_fact_notes(conn: apsw.Connection, user_id: str, content: str, actor: str) -> bool:
    """Remove the note lines that say the same as a forgotten entry."""
    return _rewrite_notes(conn, user_id, lambda kept: None if _same_fact(kept, content) else kept, actor, "note_forget")


def fact_note_index(conn: apsw.Connection, user_id: str, content: str) -> int | None:
    """Where the note line saying the same as `content` is in the person's notes, or None."""
    profile = store.get_profile(conn, user_id)
    lines = profile.notes.splitlines() if profile else []
    return next((at for at, line in enumerate(lines) if _same_fact(line, content)), None)


def restore_fact_note(conn: apsw.Connection, user_id: str, content: str, actor: str, *, at: int | None = None) -> bool:
    """Add back the note line of a fact (an undone supersession, lib/memory/undo.py): at line `at`
    when known, else last."""
    profile = store.get_profile(conn, user_id)
    lines = profile.notes.splitlines() if profile else []
    if any(_same_fact(line, content) for line in lines):
        return False
    before = len(lines)
    lines.insert(before if at is None else at, f"- {content}")
    store.set_notes(conn, user_id, "\n".join(lines).strip())
    store.audit(conn, actor, "note_restore", user_id, lines_before=before, lines_after=len(lines))
    return True


def replace_note(conn: apsw.Connection, user_id: str, old_line: str, text: str, actor: str) -> bool:
    """Replace a note line (or the lines saying `old_line`'s fact) by `text`."""
    return _rewrite_notes(
        conn,
        user_id,
        lambda kept: f"- {text}" if _same_fact(kept, old_line.removeprefix("- ")) else kept,
        actor,
        "note_replace",
    )


def correct_entry(
    conn: apsw.Connection, settings: Settings, memory_id: int, text: str, *, actor: str, asked_by: str
) -> int | None:
    """Store `text` as the right version of entry `memory_id` and supersede the old one; the
    asker's note lines that said the old fact say the new one. Returns the new id, or None when
    the entry is gone or already replaced."""
    text = " ".join(text.split())
    if not text:
        raise ValueError("a correction needs some text")
    with immediate(conn):
        old = knowledge.get(conn, memory_id)
        if old is None or old.superseded_by is not None:
            return None
        new_id = knowledge.add(
            conn,
            settings,
            text,
            owner_user_id=old.owner_user_id,
            is_global=old.is_global,
            subject=old.subject,
            source="correction",
            actor=actor,
            because={"corrects": memory_id, "asked_by": asked_by},
        )
        knowledge.supersede(conn, memory_id, new_id, actor=actor, asked_by=asked_by)
        replace_note(conn, asked_by, old.content, text, actor)
    return new_id


def active_entry_saying(conn: apsw.Connection, owner: str, line: str) -> int | None:
    """The active entry of `owner` that says what a note line says, if any."""
    for entry in knowledge.active_facts(conn, owner):
        if _same_fact(line, entry.content):
            return entry.id
    return None
