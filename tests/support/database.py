"""Reading what the code under test stored: each query on a connection of its own, closed at once
(the database may belong to a server process or a runtime the test must not disturb).
"""

from __future__ import annotations

from pathlib import Path

from lib.db import connect, rows

INBOX_ROW_SQL = "SELECT status, reply_message_id, attempts FROM inbox WHERE update_id = ?"


def query(path: Path, sql: str, params: tuple = ()) -> list[dict]:
    """The rows of one query against the database file at `path`."""
    conn = connect(path)
    try:
        return rows(conn, sql, params)
    finally:
        conn.close()


def inbox_statuses(path: Path) -> dict[int, str]:
    """Every stored update's inbox status, by update id."""
    return {r["update_id"]: r["status"] for r in query(path, "SELECT update_id, status FROM inbox")}


def inbox_row(path: Path, update_id: int) -> dict | None:
    """One update's status, reply message id and attempts; None before it is stored."""
    found = query(path, INBOX_ROW_SQL, (update_id,))
    return found[0] if found else None


def inbox_status(path: Path, update_id: int) -> str | None:
    """One update's inbox status; None before it is stored."""
    row = inbox_row(path, update_id)
    return row and row["status"]
