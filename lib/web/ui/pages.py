"""What each web view page shows, read from the database (plain data for the templates)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import apsw

from lib.config import Settings
from lib.db import rows
from lib.memory import audit, knowledge, store

PEOPLE_SQL = """
SELECT p.user_id, p.username, p.display_name, p.updated_at,
       (SELECT count(*) FROM memories m WHERE m.owner_user_id = p.user_id AND m.superseded_by IS NULL
            AND m.retired_at IS NULL) AS memories,
       (SELECT count(*) FROM messages g WHERE g.owner_user_id = p.user_id) AS messages
FROM user_profiles p ORDER BY p.updated_at DESC LIMIT 500
"""
SESSIONS_SQL = """
SELECT s.id, s.chat_type, s.chat_id, s.created_at, s.updated_at, s.closed_at,
       (SELECT count(*) FROM messages m WHERE m.session_id = s.id) AS messages
FROM sessions s WHERE s.user_id = ? ORDER BY s.updated_at DESC LIMIT 100
"""
MESSAGES_SQL = """
SELECT id, role, content, created_at, speaker_user_id FROM messages WHERE session_id = ? ORDER BY id LIMIT 1000
"""
COST_PER_DAY_SQL = """
SELECT substr(created_at, 1, 10) AS day, sum(cost_usd) AS cost, sum(input_tokens + output_tokens) AS tokens,
       count(*) AS calls
FROM usage WHERE created_at >= ? GROUP BY day ORDER BY day
"""
# The chart's drawing area, in SVG user units.
CHART_WIDTH, CHART_HEIGHT = 720, 200


def people(conn: apsw.Connection, settings: Settings) -> list[dict]:
    """Everyone with a profile, most recently seen first, with counts."""
    owner = str(settings.config.owner) if settings.config.owner is not None else None
    return [{**r, "is_owner": r["user_id"] == owner} for r in rows(conn, PEOPLE_SQL)]


def person(conn: apsw.Connection, settings: Settings, user_id: str, query: str) -> dict | None:
    """One person's profile, their entries (or those matching `query`), and their sessions."""
    profile = store.get_profile(conn, user_id)
    if profile is None:
        return None
    if query.strip():
        from lib.memory.api import search_knowledge

        # The prompt's relevance floor: an unrelated entry is not listed as a match ("Nothing matches.").
        found = search_knowledge(conn, settings, user_id=user_id, query=query, limit=50, floor=True)
        entries = [e for r in found if (e := knowledge.get(conn, r.id)) is not None and e.owner_user_id == user_id]
    else:
        entries = knowledge.list_entries(conn, owner_user_id=user_id, include_inactive=True, limit=500)
    return {
        "profile": profile,
        "entries": entries,
        "now": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S"),
        "sessions": rows(conn, SESSIONS_SQL, (user_id,)),
    }


def session(conn: apsw.Connection, session_id: int) -> dict | None:
    """A session and its messages."""
    found = rows(
        conn, "SELECT id, user_id, chat_type, chat_id, created_at, summary FROM sessions WHERE id = ?", (session_id,)
    )
    if not found:
        return None
    return {"session": found[0], "messages": rows(conn, MESSAGES_SQL, (session_id,))}


def audit_trail(conn: apsw.Connection, *, memory_id: int | None, actor: str | None) -> list[audit.AuditEntry]:
    """The latest audit rows, for one entry or one actor when asked."""
    return audit.entries(conn, memory_id=memory_id, actor=actor or None, limit=300)


def usage(conn: apsw.Connection, *, days: int = 30, today: datetime | None = None) -> dict:
    """Cost and tokens per UTC day for the last `days` days, with the bars of the chart."""
    today = (today or datetime.now(UTC)).date()
    first = today - timedelta(days=days - 1)
    found = {r["day"]: r for r in rows(conn, COST_PER_DAY_SQL, (first.isoformat(),))}
    series = []
    for offset in range(days):
        day = (first + timedelta(days=offset)).isoformat()
        r = found.get(day)
        series.append(
            {
                "day": day,
                "cost": r["cost"] if r else 0.0,
                "tokens": r["tokens"] if r else 0,
                "calls": r["calls"] if r else 0,
            }
        )
    top = max((d["cost"] for d in series), default=0.0)
    scale = top or 1.0  # the bars' scale; the page says the real top, $0 when nothing cost anything
    slot = CHART_WIDTH / days
    for index, d in enumerate(series):
        height = round(d["cost"] / scale * (CHART_HEIGHT - 20), 1)
        d.update(
            x=round(index * slot + 2, 1), width=round(slot - 4, 1), height=height, y=round(CHART_HEIGHT - height, 1)
        )
    return {
        "series": series,
        "total": sum(d["cost"] for d in series),
        "tokens": sum(d["tokens"] for d in series),
        "top": top,
        "width": CHART_WIDTH,
        "height": CHART_HEIGHT,
    }
