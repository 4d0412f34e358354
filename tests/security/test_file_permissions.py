"""Attack: another account on the host reads people's conversations from a world-readable file.
The database, its WAL, backups and pre-migration copies are created 0600 whatever the umask."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from lib.backup import backup_to
from lib.db import connect
from lib.migrations import STEPS, migrate


@pytest.fixture(autouse=True)
def permissive_umask():
    old = os.umask(0o022)  # the usual default, which made them 0644
    yield
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_database_and_its_wal_are_private(tmp_path):
    db = tmp_path / "data" / "ash.db"
    conn = connect(db)
    migrate(conn, db)
    conn.execute("INSERT INTO meta (key, value) VALUES ('note', 'secret')")
    files = [db, db.with_name("ash.db-wal"), db.with_name("ash.db-shm")]
    assert {path.name: mode(path) for path in files if path.exists()} == {path.name: 0o600 for path in files}
    conn.close()


def test_backups_and_pre_migration_copies_are_private(tmp_path):
    db = tmp_path / "ash.db"
    conn = connect(db)
    migrate(conn, db, steps=STEPS[:-1])  # a database one version behind, with data in it
    conn.execute("INSERT INTO meta (key, value) VALUES ('note', 'secret')")
    migrate(conn, db)  # takes a copy before the pending step
    conn.close()
    (copy,) = tmp_path.glob("ash.db.pre-*.bak")
    assert mode(copy) == 0o600
    backup = backup_to(db, tmp_path / "backups")
    assert mode(backup) == 0o600
    loose = tmp_path / "existing.db"
    loose.write_bytes(b"")
    os.chmod(loose, 0o644)
    assert mode(backup_to(db, loose, overwrite=True)) == 0o600
