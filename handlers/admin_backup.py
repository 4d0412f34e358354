"""`POST /admin/backup`: a consistent snapshot of the database, streamed as the response body."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from litestar import Request, post
from litestar.background_tasks import BackgroundTask
from litestar.response import File

from lib.db import copy_database, stamp
from lib.web.auth import admin_guard
from lib.web.state import get_runtime


@post("/admin/backup", guards=[admin_guard], sync_to_thread=True, status_code=200)
def admin_backup(request: Request) -> File:
    """Snapshot the database with SQLite's backup API and send it (application/vnd.sqlite3)."""
    runtime = get_runtime(request.app)
    db_path = runtime.settings.database_path
    # Next to the database: same volume, so there is room and nothing leaves the data directory.
    handle, name = tempfile.mkstemp(prefix=".backup-", suffix=".db", dir=db_path.parent)
    os.close(handle)
    snapshot = copy_database(runtime.db.conn(), Path(name))
    return File(
        path=snapshot,
        filename=f"ash-{stamp()}.db",
        media_type="application/vnd.sqlite3",
        background=BackgroundTask(os.unlink, snapshot),
    )
