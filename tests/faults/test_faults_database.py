"""The database cannot take writes: the disk is full, or the file system is read-only.

The database lives on a small tmpfs mounted for the test (needs root; skipped otherwise).
The webhook must answer 503 (Telegram retries later), acknowledge nothing it did not store, and
store everything again once the disk has room or is writable.
"""

from __future__ import annotations

import contextlib
import errno
import subprocess
from pathlib import Path

import pytest
from litestar.testing import TestClient

from lib.db import connect
from lib.migrations import migrate
from tests.support.telegram import SECRET, load

HEADERS = {"x-telegram-bot-api-secret-token": SECRET}


@pytest.fixture
def small_fs(tmp_path: Path):
    """A 4 MB tmpfs, unmounted afterwards."""
    mount_point = tmp_path / "fs"
    mount_point.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount_point)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


@pytest.fixture
def client(small_fs: Path, monkeypatch):
    home = small_fs / "home"
    monkeypatch.setenv("ASH_HOME", str(home))
    monkeypatch.setenv("TELEGRAM_WEBHOOK_SECRET", SECRET)
    conn = connect(home / "ash.db")
    migrate(conn)
    # An empty WAL: the next write must grow a file, so a full disk shows at once.
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    from app import app

    with TestClient(app) as test_client:
        yield test_client


def _update(update_id: int) -> dict:
    update = load("update_channel_post.json")
    update["update_id"] = update_id
    return update


def _stored(home: Path) -> set[int]:
    conn = connect(home / "ash.db", readonly=True)
    try:
        return {row[0] for row in conn.execute("SELECT update_id FROM inbox")}
    finally:
        conn.close()


def _fill(directory: Path) -> Path:
    """Write a file until the file system is full."""
    filler = directory / "filler"
    # Unbuffered: closing a buffered file on a full disk raised ENOSPC again, out of this function.
    with filler.open("wb", buffering=0) as out:
        try:
            while True:
                out.write(b"\0" * 65536)
                out.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return filler


def _post_all(client: TestClient, ids: range) -> dict[int, int]:
    return {i: client.post("/telegram/webhook", json=_update(i), headers=HEADERS).status_code for i in ids}


def test_disk_full_answers_503_and_acknowledges_nothing_unstored(client: TestClient, small_fs: Path):
    home = small_fs / "home"
    assert _post_all(client, range(1, 4)) == {1: 200, 2: 200, 3: 200}
    filler = small_fs / "filler"
    with contextlib.suppress(OSError):
        _fill(small_fs)
    # Keep writing until SQLite's own slack is used up; no answer may be 200 for a lost row.
    statuses = _post_all(client, range(100, 160))
    assert set(statuses.values()) <= {200, 503}
    assert 503 in statuses.values()
    acknowledged = {i for i, status in statuses.items() if status == 200}
    stored = _stored(home)
    assert acknowledged <= stored
    assert client.get("/healthz").status_code == 200

    filler.unlink()
    # Telegram retries what got a 503: now every update is stored, each exactly once.
    again = _post_all(client, range(100, 160))
    assert set(again.values()) == {200}
    assert set(range(100, 160)) | {1, 2, 3} == _stored(home)


@pytest.fixture
def read_only_home(small_fs: Path, tmp_path: Path, monkeypatch):
    """A migrated home seen through a read-only bind mount (made writable again by the test)."""
    home = small_fs / "home"
    conn = connect(home / "ash.db")
    migrate(conn)
    conn.execute("INSERT INTO inbox (bot_id, update_id, kind, payload, received_at) VALUES (0, 1, 'x', x'7b7d', 'now')")
    conn.close()
    view = tmp_path / "view"
    view.mkdir()
    subprocess.run(["mount", "--bind", str(small_fs), str(view)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(view)], check=True)
        monkeypatch.setenv("ASH_HOME", str(view / "home"))
        monkeypatch.setenv("TELEGRAM_WEBHOOK_SECRET", SECRET)
        yield view
    finally:
        subprocess.run(["umount", "-l", str(view)], check=False)


def test_read_only_file_system_answers_503_then_recovers(read_only_home: Path):
    from app import app

    home = read_only_home / "home"
    with TestClient(app) as client:
        statuses = _post_all(client, range(10, 15))
        assert set(statuses.values()) == {503}
        assert client.get("/healthz").status_code == 200
        subprocess.run(["mount", "-o", "remount,bind,rw", str(read_only_home)], check=True)
        # Writable again: the same process stores what Telegram sends again.
        assert set(_post_all(client, range(10, 15)).values()) == {200}
    assert _stored(home) == {1, 10, 11, 12, 13, 14}
