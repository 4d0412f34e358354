"""Who may talk to Ash: the config's allowed_users plus `ash users allow` rows, minus denials,
read on every check.

Empty means nobody (fail closed); the owner is always allowed and cannot be denied. An
@username entry is pinned to the numeric id of the first user who writes with that name, and
from then on only that id matches it (usernames can be given up and taken by someone else).
A pin made for a config.toml entry counts only while the file still lists it. A denial (`ash
users deny`) wins over both lists until the person is allowed again; their data is kept.
"""

from __future__ import annotations

from dataclasses import dataclass

import apsw

from lib.config import Settings
from lib.config.people import parse_entry
from lib.db import immediate, now_iso, one, rows
from lib.errors import OwnerProtected
from lib.memory import browse, store

DB_ENTRIES_SQL = "SELECT entry, user_id, source FROM allowed_users"

PIN_SQL = """
INSERT INTO allowed_users (entry, user_id, source, added_at, pinned_at) VALUES (:entry, :user_id, 'config', :now, :now)
ON CONFLICT (entry) DO UPDATE SET user_id = :user_id, pinned_at = :now WHERE allowed_users.user_id IS NULL
"""

ALLOW_SQL = """
INSERT INTO allowed_users (entry, user_id, source, added_at) VALUES (?, ?, ?, ?)
ON CONFLICT (entry) DO NOTHING
"""

IS_DENIED_SQL = "SELECT 1 AS denied FROM denied_users WHERE user_id = :user_id OR entry = :name LIMIT 1"
DENY_SQL = """
INSERT INTO denied_users (entry, user_id, source, denied_at) VALUES (:entry, :user_id, :source, :now)
ON CONFLICT (entry) DO UPDATE SET user_id = coalesce(excluded.user_id, user_id), source = excluded.source,
    denied_at = excluded.denied_at
"""
# What a denial takes away: the entries `ash users allow` or the admin API added for the person.
# Pins of config.toml entries stay, so the name cannot pass to whoever takes it next.
REVOKE_SQL = """
DELETE FROM allowed_users WHERE source != 'config' AND (entry = :entry OR (:user_id IS NOT NULL AND user_id = :user_id))
"""
# Allowing a person again lifts their denials: by id, and by any @name that was pinned to them.
LIFT_SQL = "DELETE FROM denied_users WHERE entry = :entry OR (:user_id IS NOT NULL AND user_id = :user_id)"
PINNED_ID_SQL = """
SELECT user_id FROM allowed_users WHERE entry = :entry AND user_id IS NOT NULL
UNION ALL SELECT user_id FROM denied_users WHERE entry = :entry AND user_id IS NOT NULL
LIMIT 1
"""
DENIALS_SQL = "SELECT entry, user_id, source, denied_at FROM denied_users ORDER BY denied_at"


def normalize_entry(entry: str | int) -> str:
    """A numeric id as digits, a username as lower-case @name (config entries, never refused)."""
    text = str(entry).strip()
    if text.lstrip("-").isdigit():
        return str(int(text))
    return "@" + text.lstrip("@").lower()


def _configured(settings: Settings) -> set[str]:
    return {normalize_entry(e) for e in settings.config.telegram.allowed_users}


def _is_owner(settings: Settings, user_id: str | int | None) -> bool:
    return settings.config.owner is not None and user_id is not None and str(settings.config.owner) == str(user_id)


def _entries(conn: apsw.Connection, settings: Settings) -> tuple[set[str], dict[str, str | None]]:
    """Every allowed entry, and the ids the database's entries are pinned to (a pin made for a
    config.toml entry counts only while the file still lists it)."""
    configured = _configured(settings)
    pinned: dict[str, str | None] = {
        row["entry"]: row["user_id"]
        for row in rows(conn, DB_ENTRIES_SQL)
        if row["source"] != "config" or row["entry"] in configured
    }
    return configured | set(pinned), pinned


def is_allowed(conn: apsw.Connection, settings: Settings, user_id: int, username: str | None) -> bool:
    """True when the user may talk to Ash; pins a matching @username entry to this id first time."""
    uid = str(user_id)
    if _is_owner(settings, uid):
        return True
    name = "@" + username.lower() if username else None
    if one(conn, IS_DENIED_SQL, {"user_id": uid, "name": name}):
        return False
    entries, pinned = _entries(conn, settings)
    if uid in entries or uid in {v for v in pinned.values() if v}:
        return True
    if name is None or name not in entries:
        return False
    owner = pinned.get(name)
    if owner:
        return owner == uid
    with immediate(conn):
        conn.execute(PIN_SQL, {"entry": name, "user_id": uid, "now": now_iso()})
        # Someone else may have pinned it a moment earlier; the row decides.
        row = rows(conn, "SELECT user_id FROM allowed_users WHERE entry = ?", (name,))
    return bool(row) and row[0]["user_id"] == uid


def still_allowed(conn: apsw.Connection, settings: Settings, user_id: str) -> bool:
    """Whether the person with this numeric id may use Ash now, pinning nothing: for what acts
    for them away from Telegram (their MCP tokens). The owner always; not after a denial (by
    id, or of the @name their profile holds); else an entry by id or an @name pinned to them.
    An @name entry no one has written with yet lets no one in here: its pin is made by
    Telegram, where the name is seen."""
    uid = str(user_id)
    if _is_owner(settings, uid):
        return True
    profile = store.get_profile(conn, uid)
    name = "@" + profile.username.lower() if profile is not None and profile.username else None
    if one(conn, IS_DENIED_SQL, {"user_id": uid, "name": name}):
        return False
    entries, pinned = _entries(conn, settings)
    return uid in entries or uid in {v for v in pinned.values() if v}


@dataclass(frozen=True)
class Allowed:
    """What `allow` did: the normalised entry, whether it is new, whether a denial was lifted."""

    entry: str
    added: bool
    lifted: bool


@dataclass(frozen=True)
class Denied:
    """What `deny` did: the normalised entry, the id it holds (an @name's pinned id, if known),
    whether config.toml still lists the person (the denial wins over it), and how many of their
    scheduled tasks were removed and MCP tokens revoked."""

    entry: str
    user_id: str | None
    in_config: bool
    schedules_removed: int = 0
    mcp_tokens_revoked: int = 0


def _pinned_id(conn: apsw.Connection, key: str) -> str | None:
    if not key.startswith("@"):
        return key
    found = one(conn, PINNED_ID_SQL, {"entry": key})
    return found["user_id"] if found else None


def _owner_named(conn: apsw.Connection, settings: Settings, key: str) -> bool:
    """True when `key` (an @name) is the owner's current username."""
    if settings.config.owner is None or not key.startswith("@"):
        return False
    profile = store.get_profile(conn, str(settings.config.owner))
    return profile is not None and profile.username is not None and "@" + profile.username.lower() == key


def allow(conn: apsw.Connection, entry: str | int, source: str = "cli") -> Allowed:
    """Let a user in by numeric id or @username (validated), lifting a denial of them."""
    key = parse_entry(entry)
    with immediate(conn):
        user_id = _pinned_id(conn, key)
        conn.execute(LIFT_SQL, {"entry": key, "user_id": user_id})
        lifted = conn.changes() > 0
        # An @name denied after it was pinned keeps its pin: it lets the same person back in.
        conn.execute(ALLOW_SQL, (key, user_id, source, now_iso()))
        added = conn.changes() > 0
    return Allowed(key, added, lifted)


def deny(conn: apsw.Connection, settings: Settings, entry: str | int, source: str = "cli") -> Denied:
    """Take a user's access away (numeric id or @username, validated); their data is kept, but
    the tasks they scheduled are removed (they would go on writing for someone denied) and
    their MCP tokens revoked (they would go on reading and writing their memory).
    OwnerProtected for the owner."""
    from lib.mcp.tokens import revoke_person
    from lib.schedule.store import delete_user

    key = parse_entry(entry)
    with immediate(conn):
        user_id = _pinned_id(conn, key)
        if _is_owner(settings, user_id) or _owner_named(conn, settings, key):
            raise OwnerProtected(f"{key} is the owner (`owner` in config.toml), who always has access")
        conn.execute(REVOKE_SQL, {"entry": key, "user_id": user_id})
        now = now_iso()
        conn.execute(DENY_SQL, {"entry": key, "user_id": user_id, "source": source, "now": now})
        if user_id is not None and user_id != key:
            conn.execute(DENY_SQL, {"entry": user_id, "user_id": user_id, "source": source, "now": now})
        removed = delete_user(conn, user_id) if user_id is not None else 0
        revoked = revoke_person(conn, user_id, actor=source) if user_id is not None else 0
    return Denied(key, user_id, bool({key, user_id} & _configured(settings)), removed, revoked)


def listing(conn: apsw.Connection, settings: Settings) -> list[dict]:
    """Every allowed entry with where it comes from and the id it is pinned to."""
    configured = _configured(settings)
    found = {
        row["entry"]: row
        for row in rows(conn, "SELECT entry, user_id, source, added_at, pinned_at FROM allowed_users ORDER BY added_at")
        if row["source"] != "config" or row["entry"] in configured
    }
    for key in configured:
        found.setdefault(
            key,
            {
                "entry": key,
                "user_id": None if key.startswith("@") else key,
                "source": "config",
                "added_at": None,
                "pinned_at": None,
            },
        )
    return list(found.values())


def denials(conn: apsw.Connection) -> list[dict]:
    """Every denial: the entry, the id it holds, who made it and when."""
    return rows(conn, DENIALS_SQL)


def _access(settings: Settings, holder: dict) -> str:
    if _is_owner(settings, holder["user_id"]):
        return "owner"
    kinds = {e["kind"] for e in holder["entries"]}
    if "deny" in kinds:
        return "denied"
    return "allowed" if kinds else "none"


def people(conn: apsw.Connection, settings: Settings) -> list[dict]:
    """Everyone Ash knows of (profiles, allowed and denied entries, the owner), each with their
    access ("owner", "allowed", "denied" or "none") and the entries that decide it. An @name not
    pinned to anyone yet is listed on its own, without a user id."""
    found: dict[str, dict] = {}

    def person(user_id: str | None, entry: str) -> dict:
        blank = {"user_id": user_id, "username": None, "display_name": None, "timezone": None, "entries": []}
        return found.setdefault(user_id or entry, blank)

    for profile in browse.profiles(conn):
        person(profile["user_id"], profile["user_id"]).update(profile)
    for kind, entries in (("allow", listing(conn, settings)), ("deny", denials(conn))):
        for row in entries:
            holder = person(row["user_id"], row["entry"])
            holder["entries"].append({"entry": row["entry"], "source": row["source"], "kind": kind})
    if settings.config.owner is not None:
        person(str(settings.config.owner), str(settings.config.owner))
    for holder in found.values():
        holder["access"] = _access(settings, holder)
    return sorted(found.values(), key=lambda p: (p["user_id"] is None, p["user_id"] or p["entries"][0]["entry"]))
