"""Restore while the server runs (`POST /admin/restore`, and `ash restore` through it).

The only process is the server, so it cannot be stopped for a restore. Instead: webhooks are
held out (503, Telegram retries) and those inside are let finish; turns stop taking new work and
running ones release their claims (they resume afterwards, editing the message they started);
the checked and migrated copy is written into the live file with SQLite's backup API, so
Litestream sees ordinary writes; the inbox, forgets and schedules are carried over
(lib/inbox/restore.py); then everything starts again.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

from litestar import Litestar

from lib.backup import RestoreResult
from lib.inbox.restore import restore_database
from lib.web.lifespan import start_turns, stop_turns
from lib.web.state import get_runtime, get_services
from lib.web.write_gate import restore_gate

log = logging.getLogger("ash")


class RestoreBusy(Exception):
    """A restore is already running."""


async def restore_live(app: Litestar, *, source: Path | None, timestamp: str | None) -> RestoreResult:
    """Replace the database under the running server; see the module docstring."""
    from lib.memory.api import close_side_connections

    runtime = get_runtime(app)
    services = get_services(app)
    gate = restore_gate(app)
    if gate.paused:
        raise RestoreBusy("a restore is already running")
    await gate.close()
    try:
        await stop_turns(services)
        close_side_connections()
        return await asyncio.to_thread(
            restore_database, runtime.settings, os.environ, source=source, timestamp=timestamp
        )
    finally:
        try:
            await start_turns(runtime, services)
        finally:
            gate.open()
        log.warning("restore finished; webhooks and turns resumed")
