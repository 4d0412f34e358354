"""A person's standing instructions: "Always confirm exact dates when I ask about deadlines."

The miss this answers (BEAM assistant chats, read by hand): each chat holds about five such turns
of the user's, and a later question they govern ("When is the non-provisional patent filing
scheduled?") shares no word with "Always confirm exact dates when I ask about deadlines or
meetings": retrieval found the instruction for 3 of the 12 questions that test one, so Ash would
have answered without it. Which instruction a question falls under is the model's call ("a
meeting at the studio" is "scheduling details"), not a match of words, and a person gives few of
them: so the newest STANDING_MAX of a person's own instructions reach every prompt of theirs, in
a section of their own (lib/agent/prompt.py), whatever the question.

What counts as one: a user turn of at most 500 characters that opens with "always" or "never"
and names when it applies by what the person does ("when I ask about", "whenever I write", "if I
forget": not "Always happy to help when I can"), or opens with "from now on", "going forward",
"henceforth", "in future" ("please" may come first). Not in a group's memory
(other people's words are data, not instructions for the one asking), and not a turn that carried
someone else's words (a forward, a file: lib/memory/screen.py refuses instructions from those).
"""

from __future__ import annotations

import json
import re

import apsw

from lib.db import rows
from lib.memory import scope
from lib.memory.store import ORIGIN_OUTSIDE
from lib.memory.types import SearchResult

STANDING_MAX = 10
# Candidates read to find STANDING_MAX: the index also holds turns such as "Never heard of it",
# which the pattern below turns down; an instruction older than 200 of those is not found.
CANDIDATES = 200

# The WHERE clause of lib/migrations/m020_standing_instructions.sql, word for word: SQLite uses a
# partial index only when the query states its terms.
CANDIDATES_SQL = """
SELECT id, content, created_at, session_id, role, token_count, metadata FROM messages INDEXED BY messages_standing
WHERE owner_user_id = ? AND role = 'user' AND length(content) <= 500 AND (
    content LIKE 'always %' OR content LIKE 'never %' OR content LIKE 'please always %'
    OR content LIKE 'please never %' OR content LIKE 'please from now on%' OR content LIKE 'from now on%'
    OR content LIKE 'going forward%' OR content LIKE 'henceforth%' OR content LIKE 'in future%'
    OR content LIKE 'in the future%'
)
ORDER BY id DESC LIMIT ?
"""

_STANDING = re.compile(
    r"^(?:please\s+)?(?:"
    r"(?:always|never)\s+(?!mind\b).*?\b(?:when|whenever|if|every time|each time)\s+I\s+"
    r"(?:ask|write|send|say|mention|request|want|need|talk|message|share|bring|type|forget|use|post)"
    r"|(?:from now on|going forward|henceforth|in (?:the )?future)\b)",
    re.IGNORECASE | re.DOTALL,
)


def is_standing_instruction(text: str) -> bool:
    """The text reads as a standing instruction to the assistant (see the module's docstring)."""
    return len(text) <= 500 and bool(_STANDING.match(text))


def standing_instructions(conn: apsw.Connection, owner: str) -> list[SearchResult]:
    """The newest STANDING_MAX standing instructions in `owner`'s memory, newest first (none for
    a group's memory)."""
    if scope.is_group_owner(owner):
        return []
    found = []
    for row in rows(conn, CANDIDATES_SQL, (owner, CANDIDATES)):
        if json.loads(row["metadata"] or "{}").get(ORIGIN_OUTSIDE) or not is_standing_instruction(row["content"]):
            continue
        metadata = {"created_at": row["created_at"], "session_id": row["session_id"], "role": row["role"]}
        found.append(
            SearchResult(row["id"], row["content"], 1.0, "message", {**metadata, "standing": True}, row["token_count"])
        )
        if len(found) == STANDING_MAX:
            break
    return found
