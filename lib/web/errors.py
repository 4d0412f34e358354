"""Where errors become HTTP responses: one mapping, for Litestar's routes and the webhook's fast door.

Database unavailable, busy, locked, full or read-only -> 503 (callers such as Telegram retry
later); a number SQLite cannot hold -> 400; anything else is a bug: logged with its traceback,
500. `app.py` installs EXCEPTION_HANDLERS; the raw webhook handler asks `status_for`.
"""

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


def unexpected_error(request: Request, exc: Exception) -> Response:
    """A bug: log it with its traceback (secrets are redacted by lib/redact.py), answer a plain 500."""
    log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return Response({"status_code": 500, "detail": "internal error; see the server log"}, status_code=500)


def number_out_of_range(_: Request, exc: Exception) -> Response:
    """A path or query number SQLite cannot hold (over 64 bits): the client's mistake, 400."""
    return Response({"status_code": 400, "detail": f"a number is out of range: {exc}"}, status_code=400)


# The database errors that mean "not now" (locked, full, read-only, gone): Telegram should retry.
# Any other apsw error is a bug and gets the logged 500.
UNAVAILABLE = (
    apsw.BusyError,
    apsw.LockedError,
    apsw.FullError,
    apsw.ReadOnlyError,
    apsw.IOError,
    apsw.CantOpenError,
    apsw.CorruptError,
    apsw.NotADBError,
)

UNAVAILABLE_ERRORS = (DatabaseUnavailable, *UNAVAILABLE)


def status_for(exc: BaseException) -> int:
    """The HTTP status an unexpected error maps to (503: retry later; 500: a bug)."""
    if isinstance(exc, UNAVAILABLE_ERRORS):
        return 503
    if isinstance(exc, OverflowError):
        return 400
    return 500


EXCEPTION_HANDLERS = {
    500: unexpected_error,
    OverflowError: number_out_of_range,
    DatabaseUnavailable: database_unavailable,
    **dict.fromkeys(UNAVAILABLE, database_unavailable),
}
