"""What an MCP client may do with one person's memory: exactly what that person's private chat
with Ash may (lib/memory/scope.py).

The memory owner is the person the token belongs to, as in their private chat: their own
messages and entries plus global ones; never another person's, never a group's transcript (a
group's messages are owned by the group, so other members' words are out of reach by
construction). Every function runs blocking SQL: call it from a worker thread.
"""

from __future__ import annotations

from dataclasses import dataclass

import apsw

from lib.config import Settings
from lib.db import now_iso, rows
from lib.mcp.tokens import Principal
from lib.memory import forget, knowledge, reinforce, scope, store
from lib.memory.api import search_all, search_messages

MAX_LIMIT = 50
GROUP_TYPES = tuple(sorted(scope.GROUP_CHAT_TYPES))
# A person's own sessions: private chats (and `ash chat`) holding messages of their memory.
OWN_SESSIONS_SQL = f"""
SELECT id, provider, chat_id, chat_type, title, created_at, updated_at, closed_at, summary
FROM sessions s
WHERE chat_type NOT IN ({", ".join("?" for _ in GROUP_TYPES)})
  AND EXISTS (SELECT 1 FROM messages m WHERE m.session_id = s.id AND m.owner_user_id = ?)
ORDER BY updated_at DESC, id DESC
"""
OWN_MESSAGES_SQL = """
SELECT id, session_id, role, content, created_at FROM messages WHERE owner_user_id = ? ORDER BY id
"""
OWN_MEMORIES_SQL = f"""
SELECT {knowledge.COLUMNS}, retired_at FROM memories WHERE owner_user_id = ? OR is_global = 1 ORDER BY id
"""


def _limit(limit: int) -> int:
    return max(1, min(int(limit), MAX_LIMIT))


def _entry(entry: knowledge.Knowledge) -> dict:
    return {
        "id": entry.id,
        "content": entry.content,
        "source": entry.source,
        "is_global": entry.is_global,
        "confidence": round(entry.confidence, 3),
        "created_at": entry.created_at,
        "expires_at": entry.expires_at,
    }


@dataclass(frozen=True)
class MemoryAccess:
    """One person's memory as their private chat sees it."""

    settings: Settings
    principal: Principal

    @property
    def owner(self) -> str:
        """Whose memory: the person's own, as in their private chat."""
        user = self.principal.user_id
        return scope.memory_owner("private", user, user)

    @property
    def is_owner(self) -> bool:
        """The configured owner may also forget global entries (as in Telegram)."""
        return str(self.settings.config.owner) == self.principal.user_id

    def recall(self, conn: apsw.Connection, query: str, limit: int) -> list[dict]:
        """Saved facts and past messages relevant to `query`, best first."""
        found = search_all(conn, self.settings, user_id=self.owner, query=query, limit=_limit(limit))
        reinforce.touch(conn, [r.id for r in found if r.source_type == "knowledge"])
        return [
            {
                "id": r.id,
                "kind": "memory" if r.source_type == "knowledge" else "message",
                "content": r.content,
                "score": round(r.score, 4),
                "created_at": r.metadata.get("created_at"),
            }
            for r in found
        ]

    def remember(self, conn: apsw.Connection, content: str, expires_at: str | None) -> dict:
        """Save a fact (or reinforce the entry that already says it); audited under the token's name."""
        # Audited by reinforce.save as memory_add or memory_reinforce, under the token's name.
        saved = reinforce.save(
            conn,
            self.settings,
            content,
            owner_user_id=self.owner,
            expires_at=expires_at,
            source="mcp",
            actor=self.principal.actor,
            # The agent holding this token wrote it: its name is the origin (mcp:NAME).
            origin=self.principal.actor,
        )
        return {"id": saved.id, "reinforced": saved.reinforced}

    def forget(self, conn: apsw.Connection, memory_id: int) -> dict | None:
        """Delete one entry for real (with the versions it replaced and the messages it came from)."""
        return forget.forget_memory(
            conn, self.settings, self.owner, int(memory_id), self.principal.actor, include_global=self.is_owner
        )

    def list_memories(self, conn: apsw.Connection, limit: int, offset: int) -> list[dict]:
        """Active entries (own and global), newest first."""
        entries = knowledge.list_entries(
            conn, owner_user_id=self.owner, include_global=True, limit=_limit(limit), offset=max(0, int(offset))
        )
        return [_entry(e) for e in entries]

    def search_history(self, conn: apsw.Connection, query: str, limit: int) -> list[dict]:
        """Past messages of the person's own chats with Ash relevant to `query`."""
        found = search_messages(conn, self.settings, user_id=self.owner, query=query, limit=_limit(limit))
        return [
            {
                "id": r.id,
                "role": r.metadata.get("role"),
                "content": r.content,
                "created_at": r.metadata.get("created_at"),
                "session_id": r.metadata.get("session_id"),
            }
            for r in found
        ]

    def profile_notes(self, conn: apsw.Connection) -> str:
        """The person's profile notes (what every prompt of theirs carries)."""
        profile = store.get_profile(conn, self.principal.user_id)
        return profile.notes if profile and profile.notes.strip() else ""

    def recent_summaries(self, conn: apsw.Connection, count: int = 5) -> list[dict]:
        """Summaries of the person's most recent private sessions that have one."""
        sessions = rows(conn, OWN_SESSIONS_SQL, (*GROUP_TYPES, self.owner))
        return [
            {"session_id": s["id"], "updated_at": s["updated_at"], "summary": s["summary"]}
            for s in sessions
            if s["summary"]
        ][:count]

    def export(self, conn: apsw.Connection) -> dict:
        """Everything of the person's own memory: profile, private sessions, messages, entries."""
        with conn:  # one read transaction: a consistent picture while the server writes
            profile = store.get_profile(conn, self.principal.user_id)
            return {
                "exported_at": now_iso(),
                "user_id": self.principal.user_id,
                "profile": None
                if profile is None
                else {"notes": profile.notes, "timezone": profile.timezone, "username": profile.username},
                "sessions": rows(conn, OWN_SESSIONS_SQL, (*GROUP_TYPES, self.owner)),
                "messages": rows(conn, OWN_MESSAGES_SQL, (self.owner,)),
                "memories": rows(conn, OWN_MEMORIES_SQL, (self.owner,)),
            }
