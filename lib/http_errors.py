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


def number_out_of_range(_: Request, exc: Exception) -> Response:
    """A path or query number SQLite cannot hold (over 64 bits): the client's mistake, 400."""
    return Response({"status_code": 400, "detail": f"a number is out of range: {exc}"}, status_code=400)


EXCEPTION_HANDLERS = {
    OverflowError: number_out_of_range,
    DatabaseUnavailable: database_unavailable,
    apsw.Error: database_unavailable,
}
