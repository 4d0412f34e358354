"""Liveness and readiness probes."""

from litestar import Request, get
from litestar.response import Response

from lib.migrations import database_ready
from lib.web.state import get_runtime


@get("/healthz", sync_to_thread=False, include_in_schema=True)
def healthz() -> dict[str, str]:
    """The process is alive and serving."""
    return {"status": "ok"}


@get("/readyz", sync_to_thread=True)
def readyz(request: Request) -> Response[dict[str, str]]:
    """200 when the database opens and is fully migrated, else 503 with the reason."""
    ok, reason = database_ready(get_runtime(request.app).db)
    return Response({"status": "ready" if ok else "unavailable", "detail": reason}, status_code=200 if ok else 503)
