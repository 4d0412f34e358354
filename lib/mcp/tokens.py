"""Bearer tokens for Ash's MCP server: made by `ash mcp token create`, stored only as hashes.

A token is `ashmcp_` plus 32 random bytes (URL-safe base64). Only its sha256 is stored; the
text is shown once, when it is made. Checking a token hashes what was sent and compares it with
every stored hash in constant time (`hmac.compare_digest`, no early exit), so neither the
answer nor its timing tells how close a guess was. Revoked tokens keep their row: MCP counts as
enabled once any token was ever made (never enabled: 403; a wrong, revoked or expired token: 401).

A token acts only while its person may still use Ash (the `allowed` check its caller passes in:
the owner always); denying a person (`ash users deny`, the admin API) also revokes their tokens
(`revoke_person`).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import Enum

import apsw

from lib.db import immediate, now_iso, one, rows
from lib.memory import store

PREFIX = "ashmcp_"
INSERT_SQL = """
INSERT INTO mcp_tokens (user_id, name, token_hash, read_only, created_at, expires_at)
VALUES (:user, :name, :hash, :read_only, :now, :expires_at)
"""
CANDIDATES_SQL = "SELECT id, user_id, name, token_hash, read_only, expires_at, revoked_at FROM mcp_tokens"
LIST_SQL = """
SELECT id, user_id, name, read_only, created_at, expires_at, revoked_at, last_used_at FROM mcp_tokens ORDER BY id
"""
USED_SQL = "UPDATE mcp_tokens SET last_used_at = ? WHERE id = ?"
REVOKE_SQL = "UPDATE mcp_tokens SET revoked_at = :now WHERE id = :id AND revoked_at IS NULL"
REVOKE_PERSON_SQL = """
UPDATE mcp_tokens SET revoked_at = :now WHERE user_id = :user AND revoked_at IS NULL RETURNING id, name
"""
# What `create` makes: the prefix and 32 random bytes in URL-safe base64 (43 characters).
BEARER = re.compile(r"[Bb][Ee][Aa][Rr][Ee][Rr] +(ashmcp_[A-Za-z0-9_-]{43}) *")

# Whether the person with this user id may still use Ash (the owner always may).
Allowed = Callable[[apsw.Connection, str], bool]


@dataclass(frozen=True)
class Principal:
    """Who an MCP session acts for: a person's memory, through one token (or the local stdio server)."""

    user_id: str
    name: str
    read_only: bool = False

    @property
    def actor(self) -> str:
        """How the audit log names writes made through this session."""
        return f"mcp:{self.name}"


class Refusal(Enum):
    """Why a request was not let in."""

    DISABLED = "disabled"  # no token was ever made: MCP is off (403)
    MISSING = "missing"  # no bearer token at all (401)
    UNKNOWN = "unknown"  # a token no one was ever given: a guess, counted by lib/auth_limit.py (401)
    REVOKED = "revoked"  # revoked, expired, or its person may no longer use Ash (401)

    @property
    def status(self) -> int:
        """The HTTP status it is answered with."""
        return 403 if self is Refusal.DISABLED else 401


def well_formed(authorization: str | None) -> bool:
    """Whether an Authorization header is `Bearer` and a token of the shape `create` makes (checked
    before a request's body is read; the database says whether it is a real one)."""
    return bool(authorization) and BEARER.fullmatch(authorization) is not None


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def create(
    conn: apsw.Connection, user_id: str, *, name: str, read_only: bool = False, expires_days: float | None = None
) -> tuple[str, int]:
    """Make a token for `user_id`; returns its text (shown once, never stored) and its id."""
    token = PREFIX + secrets.token_urlsafe(32)
    expires_at = _stamp(datetime.now(UTC) + timedelta(days=expires_days)) if expires_days else None
    with immediate(conn):
        conn.execute(
            INSERT_SQL,
            {
                "user": user_id,
                "name": name,
                "hash": _hash(token),
                "read_only": int(read_only),
                "now": now_iso(),
                "expires_at": expires_at,
            },
        )
        token_id = conn.last_insert_rowid()
        store.audit(conn, "cli", "mcp_token_create", user_id, token_id=token_id, name=name, read_only=read_only)
    return token, token_id


def list_tokens(conn: apsw.Connection) -> list[dict]:
    """Every token ever made (never their text): id, user, name, read-only, dates."""
    return [{**r, "read_only": bool(r["read_only"])} for r in rows(conn, LIST_SQL)]


def revoke(conn: apsw.Connection, token_id: int) -> bool:
    """Revoke a token at once; False when there is no such live token."""
    with immediate(conn):
        found = one(conn, "SELECT user_id, name FROM mcp_tokens WHERE id = ?", (token_id,))
        conn.execute(REVOKE_SQL, {"id": token_id, "now": now_iso()})
        if not conn.changes():
            return False
        store.audit(conn, "cli", "mcp_token_revoke", found["user_id"], token_id=token_id, name=found["name"])
    return True


def revoke_person(conn: apsw.Connection, user_id: str, *, actor: str) -> int:
    """Revoke every live token of a person (their access was taken away); how many."""
    with immediate(conn):
        revoked = rows(conn, REVOKE_PERSON_SQL, {"user": user_id, "now": now_iso()})
        for token in revoked:
            store.audit(conn, actor, "mcp_token_revoke", user_id, token_id=token["id"], name=token["name"], denied=True)
    return len(revoked)


def _check(conn: apsw.Connection, authorization: str | None, allowed: Allowed) -> dict | Refusal:
    candidates = rows(conn, CANDIDATES_SQL)
    if not candidates:
        return Refusal.DISABLED
    scheme, _, given = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        return Refusal.MISSING
    sent = _hash(given.strip())
    match = None
    for row in candidates:  # every row is compared: no early exit
        if hmac.compare_digest(sent.encode(), row["token_hash"].encode()):
            match = row
    if match is None:
        return Refusal.UNKNOWN
    if match["revoked_at"] is not None or (match["expires_at"] and match["expires_at"] <= now_iso()):
        return Refusal.REVOKED
    if not allowed(conn, match["user_id"]):
        return Refusal.REVOKED
    return match


def check(conn: apsw.Connection, authorization: str | None, *, allowed: Allowed) -> Principal | Refusal:
    """What `authenticate` would answer, without recording the use (reads only)."""
    found = _check(conn, authorization, allowed)
    if isinstance(found, Refusal):
        return found
    return Principal(user_id=found["user_id"], name=found["name"], read_only=bool(found["read_only"]))


def authenticate(conn: apsw.Connection, authorization: str | None, *, allowed: Allowed) -> Principal | Refusal:
    """The principal an `Authorization: Bearer ...` header stands for, or why it is refused."""
    found = _check(conn, authorization, allowed)
    if isinstance(found, Refusal):
        return found
    with immediate(conn):
        conn.execute(USED_SQL, (now_iso(), found["id"]))
    return Principal(user_id=found["user_id"], name=found["name"], read_only=bool(found["read_only"]))
