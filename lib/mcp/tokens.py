"""Bearer tokens for Ash's MCP server: made by `ash mcp token create`, stored only as hashes.

A token is `ashmcp_` plus 32 random bytes (URL-safe base64). Only its sha256 is stored; the
text is shown once, when it is made. Checking a token hashes what was sent and compares it with
every stored hash in constant time (`hmac.compare_digest`, no early exit), so neither the
answer nor its timing tells how close a guess was. Revoked tokens keep their row: MCP counts as
enabled once any token was ever made (never enabled: 403; a wrong, revoked or expired token: 401).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
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

    DISABLED = 403  # no token was ever made: MCP is off
    UNAUTHORIZED = 401  # missing, wrong, revoked or expired


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


def authenticate(conn: apsw.Connection, authorization: str | None) -> Principal | Refusal:
    """The principal an `Authorization: Bearer ...` header stands for, or why it is refused."""
    candidates = rows(conn, CANDIDATES_SQL)
    if not candidates:
        return Refusal.DISABLED
    scheme, _, given = (authorization or "").partition(" ")
    sent = _hash(given.strip()) if scheme.lower() == "bearer" and given.strip() else ""
    match = None
    for row in candidates:  # every row is compared: no early exit
        if hmac.compare_digest(sent.encode(), row["token_hash"].encode()):
            match = row
    now = now_iso()
    if match is None or match["revoked_at"] is not None or (match["expires_at"] and match["expires_at"] <= now):
        return Refusal.UNAUTHORIZED
    with immediate(conn):
        conn.execute(USED_SQL, (now, match["id"]))
    return Principal(user_id=match["user_id"], name=match["name"], read_only=bool(match["read_only"]))
