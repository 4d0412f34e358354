"""Web view sessions: the admin token signs in once, then a random session id in a cookie.

- The cookie holds 32 random bytes; the database holds only their sha256, with an expiry and the
  fingerprint (an HMAC) of the admin token the session was opened with. A session whose
  fingerprint is not the current token's is revoked when it is next seen: changing
  ASH_ADMIN_TOKEN signs every browser out. Signing out revokes the row.
- The cookie is HttpOnly, SameSite=Strict, scoped to Path=/admin/ui (the browser never sends it
  to the JSON admin API, which does not read cookies anyway) and Secure except for a plain-http
  request from loopback (a browser on the machine itself).
- Every write carries a CSRF token: an HMAC of the session id, so it is never stored and cannot
  be derived without the cookie. The sign-in form, before any session, uses the same scheme over
  a short-lived pre-session cookie (double submit).
- Failed sign-ins count against the client in the one limit on failed authentications
  (lib/auth_limit.py, shared with the admin API and /mcp); past it every attempt, right or
  wrong, is refused with 429 until the window has passed.
All comparisons of secrets are constant-time (hmac.compare_digest); no secret is logged.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass

import apsw

from lib.db import immediate, now_iso, one

COOKIE = "ash_ui"
PRE_COOKIE = "ash_ui_signin"
PATH = "/admin/ui"
LIFETIME = 12 * 3600
PRE_LIFETIME = 15 * 60
LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})

SESSION_SQL = """
SELECT id, token_fingerprint, expires_at FROM ui_sessions
WHERE session_hash = ? AND revoked_at IS NULL
"""


@dataclass(frozen=True)
class UiSession:
    """A signed-in browser: its row, and the raw id (from the cookie) its CSRF token derives from."""

    id: int
    raw: str

    @property
    def csrf(self) -> str:
        """The token every form of this session must send back."""
        return csrf_for(self.raw)


def _hash(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def fingerprint(admin_token: str) -> str:
    """What a session remembers of the token it was opened with (not the token)."""
    return hmac.new(admin_token.encode(), b"ash-ui-session", hashlib.sha256).hexdigest()


def csrf_for(raw: str, purpose: str = "csrf") -> str:
    """The CSRF token bound to a session (or pre-session) id."""
    return hmac.new(raw.encode(), purpose.encode(), hashlib.sha256).hexdigest()


def csrf_ok(raw: str | None, given: str | None, purpose: str = "csrf") -> bool:
    """Whether `given` is the CSRF token of `raw` (constant-time)."""
    if not raw or not given:
        return False
    return hmac.compare_digest(csrf_for(raw, purpose).encode(), given.encode())


def token_ok(expected: str, given: str) -> bool:
    """The admin token check, constant-time."""
    return hmac.compare_digest(given.strip().encode(), expected.encode())


def current(conn: apsw.Connection, raw: str | None, admin_token: str, *, now: float | None = None) -> UiSession | None:
    """The session a cookie names, if it is live and was opened with the current admin token."""
    if not raw or len(raw) > 200:
        return None
    found = one(conn, SESSION_SQL, (_hash(raw),))
    if found is None or found["expires_at"] <= (now or time.time()):
        return None
    if not hmac.compare_digest(found["token_fingerprint"].encode(), fingerprint(admin_token).encode()):
        # Opened with a token that is no longer the admin token: revoked for good.
        revoke(conn, raw)
        return None
    with immediate(conn):
        conn.execute("UPDATE ui_sessions SET last_seen_at = ? WHERE id = ?", (now_iso(), found["id"]))
    return UiSession(found["id"], raw)


def is_live(conn: apsw.Connection, raw: str | None, admin_token: str, *, now: float | None = None) -> bool:
    """Whether a cookie names a live session of the current admin token; reads only (`current`
    then records the visit, or revokes a session of an older token)."""
    if not raw or len(raw) > 200:
        return False
    found = one(conn, SESSION_SQL, (_hash(raw),))
    return (
        found is not None
        and found["expires_at"] > (now or time.time())
        and hmac.compare_digest(found["token_fingerprint"].encode(), fingerprint(admin_token).encode())
    )


def open_session(conn: apsw.Connection, admin_token: str, *, now: float | None = None) -> str:
    """A new session for a browser that gave the right token; returns the raw id for the cookie.
    Sessions of any other token are revoked on the way."""
    raw = secrets.token_urlsafe(32)
    now = now or time.time()
    mark = fingerprint(admin_token)
    with immediate(conn):
        conn.execute(
            "UPDATE ui_sessions SET revoked_at = ? WHERE revoked_at IS NULL AND token_fingerprint != ?",
            (now_iso(), mark),
        )
        # Expired and revoked rows are of no use to anyone.
        conn.execute("DELETE FROM ui_sessions WHERE expires_at < ?", (now - LIFETIME,))
        conn.execute(
            "INSERT INTO ui_sessions (session_hash, token_fingerprint, created_at, expires_at) VALUES (?, ?, ?, ?)",
            (_hash(raw), mark, now_iso(), now + LIFETIME),
        )
    return raw


def revoke(conn: apsw.Connection, raw: str) -> None:
    """Sign a session out."""
    with immediate(conn):
        conn.execute(
            "UPDATE ui_sessions SET revoked_at = ? WHERE session_hash = ? AND revoked_at IS NULL",
            (now_iso(), _hash(raw)),
        )


def cookie(name: str, value: str, *, secure: bool, max_age: int) -> dict:
    """A cookie's attributes: HttpOnly, SameSite=Strict, only for the web view's paths."""
    return {
        "key": name,
        "value": value,
        "path": PATH,
        "max_age": max_age,
        "httponly": True,
        "samesite": "strict",
        "secure": secure,
    }


def needs_secure(client_host: str | None, scheme: str, host_header: str) -> bool:
    """Secure cookies except for plain http from the machine itself to a loopback name."""
    host = host_header.rsplit(":", 1)[0].strip("[]") if host_header else ""
    return not (scheme == "http" and client_host in LOOPBACK and host in LOOPBACK)
