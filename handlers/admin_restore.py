"""`POST /admin/restore`: replace the database while the server runs (a path on the server, or the
replica at a point in time; never an upload)."""

from __future__ import annotations

from pathlib import Path

import msgspec
from litestar import Request, post
from litestar.exceptions import ClientException, HTTPException
from litestar.params import JSONBody

from lib.web.auth import admin_guard


class RestoreRequest(msgspec.Struct, forbid_unknown_fields=True):
    """Exactly one source: `path` (a file on the server) or `from_replica` (with an optional
    RFC 3339 `timestamp`)."""

    path: str | None = None
    from_replica: bool = False
    timestamp: str | None = None


@post("/admin/restore", guards=[admin_guard], status_code=200)
async def admin_restore(request: Request, data: JSONBody[RestoreRequest]) -> dict:
    """Restore the database without stopping the server; webhooks meanwhile get 503 (retried)."""
    # The restore machinery loads on use: start-up does not pay for it.
    from lib.backup import BackupError
    from lib.replica.litestream import ReplicaError
    from lib.web.restore import RestoreBusy, restore_live

    if bool(data.path) == data.from_replica:
        raise ClientException("give either path or from_replica: true")
    if data.timestamp and not data.from_replica:
        raise ClientException("timestamp applies to from_replica only")
    try:
        result = await restore_live(
            request.app, source=Path(data.path) if data.path else None, timestamp=data.timestamp
        )
    except RestoreBusy as exc:
        raise HTTPException(status_code=409, detail=str(exc)) from None
    except (BackupError, ReplicaError) as exc:
        raise ClientException(str(exc)) from None
    return {
        "restored_from": "replica" if data.from_replica else str(result.restored_from),
        "previous_copy": str(result.previous_copy) if result.previous_copy else None,
        "migrated": result.applied_migrations,
        "carried": result.carried,
    }
