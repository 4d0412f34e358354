"""Where errors become HTTP responses: the one mapping `app.py` installs."""

from __future__ import annotations

import logging

import apsw
from litestar import Request, Response

from lib.errors import DatabaseUnavailable

log = logging.getLogger("ash")


def database_unavailable(_: Request, exc: Exception) -> Response:
    """The database cannot be used: 503, so callers (Telegram) retry later."""
    log.error("database unavailable: %s", exc)
    return Response({"status_code": 503, "detail": "database unavailable, retry later"}, status_code=503)


EXCEPTION_HANDLERS = {
    DatabaseUnavailable: database_unavailable,
    apsw.Error: database_unavailable,
}
