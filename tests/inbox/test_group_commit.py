"""The webhook's group-committing writer: every request learns the fate of its own row."""

from __future__ import annotations

import asyncio

import pytest

from lib.db import connect
from lib.errors import DatabaseUnavailable
from lib.inbox import queue as inbox
from lib.inbox.group_commit import InboxWriter


@pytest.fixture
async def writer(db_path):
    w = InboxWriter(db_path, bot_id=7)
    await w.start()
    yield w
    await w.stop()


async def test_concurrent_stores_are_all_committed_and_repeats_reported(writer, db_path):
    results = await asyncio.gather(*(writer.store(i, str(i % 3), "message", b"{}") for i in range(300)))
    assert results == [True] * 300
    again = await asyncio.gather(writer.store(5, "2", "message", b"{}"), writer.store(300, "0", "message", b"{}"))
    assert again == [False, True]
    conn = connect(db_path)
    assert conn.execute("SELECT count(*) FROM inbox WHERE bot_id = 7").fetchone()[0] == 301
    assert inbox.get(conn, 7, 299)["chat_key"] == "2"


async def test_a_refused_batch_fails_every_request_in_it_and_stores_nothing(writer, db_path):
    conn = connect(db_path)
    conn.execute(
        "CREATE TRIGGER refuse BEFORE INSERT ON inbox WHEN new.update_id = 13 BEGIN SELECT RAISE(ABORT, 'no'); END"
    )
    outcomes = await asyncio.gather(
        *(writer.store(i, "1", "message", b"{}") for i in range(10, 16)), return_exceptions=True
    )
    stored = {r[0] for r in conn.execute("SELECT update_id FROM inbox")}
    # Whatever shared a transaction with update 13 failed with it; nothing reported stored is missing.
    for update_id, outcome in zip(range(10, 16), outcomes, strict=True):
        assert (outcome is True) == (update_id in stored)
    assert isinstance(outcomes[3], Exception) and 13 not in stored
    conn.execute("DROP TRIGGER refuse")
    assert await writer.store(13, "1", "message", b"{}") is True


async def test_an_unusable_database_is_reported_not_hung(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    writer = InboxWriter(blocker / "ash.db", bot_id=1)
    await writer.start()
    with pytest.raises(DatabaseUnavailable):
        await asyncio.wait_for(writer.store(1, "1", "message", b"{}"), 5)
    await writer.stop()
