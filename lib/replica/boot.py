"""At start-up with an empty volume: the database comes back from the replica first.

The replica's copy is written beside the database, then restored like any backup
(lib/backup.py `restore_from`): its schema is compared with what Ash's migrations make, its
vectors are dropped and rebuilt, and only then does it become the live file. A replica that
fails the check stops the start: serving an empty database would replicate it over the
history that is still there.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Mapping
from pathlib import Path

from lib.backup import restore_from
from lib.config import Settings
from lib.db import stamp
from lib.replica.litestream import clean_output, restore
from lib.replica.target import replica_of

log = logging.getLogger("ash.replica")


def _leftovers(db_path: Path) -> list[Path]:
    """Files a database deleted on its own leaves behind, which SQLite or Litestream would replay
    into a new one (Litestream's tips: delete the -wal, -shm and -litestream files too)."""
    return [
        Path(f"{db_path}-wal"),
        Path(f"{db_path}-shm"),
        db_path.with_name(f".{db_path.name}-litestream"),
    ]


def restore_at_boot(settings: Settings, environ: Mapping[str, str]) -> bool:
    """Restore the database from the replica when there is none here; True when it did."""
    replica = replica_of(settings)
    db_path = settings.database_path
    if replica is None or db_path.exists():
        return False
    for leftover in _leftovers(db_path):
        if leftover.is_dir():
            shutil.rmtree(leftover)
        else:
            leftover.unlink(missing_ok=True)
    db_path.parent.mkdir(parents=True, exist_ok=True)
    staged = db_path.with_name(f"{db_path.name}.from-replica-{stamp()}")
    try:
        if not restore(replica, staged, environ, settings.home):
            log.warning("no database here and none in the replica %s yet: starting empty", replica.url)
            return False
        restore_from(staged, db_path)
    finally:
        clean_output(staged)
    log.warning("restored %s from the replica %s", db_path, replica.url)
    return True
