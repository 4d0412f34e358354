"""Readiness: can the database be used right now?"""

from __future__ import annotations

import apsw

from lib.db import Database
from lib.errors import AshError


def database_ready(db: Database) -> tuple[bool, str]:
    """(True, "migrated") when the database opens and has every migration applied."""
    from migrate import status

    try:
        state = status(db.conn())
    except (AshError, apsw.Error) as exc:
        db.close()
        return False, f"database unavailable: {exc}"
    if state.unknown:
        return False, "database is from a newer Ash: " + ", ".join(state.unknown)
    if state.pending:
        return False, "migrations pending: " + ", ".join(state.pending)
    return True, "migrated"
