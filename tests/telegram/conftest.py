"""Fixtures for the Telegram tests: an allowed user, a runtime over the test's database, the fake Bot API."""

from __future__ import annotations

import httpx
import pytest

from tests.support.telegram import make_runtime, point_at_fake_bot_api

USER = 408258968  # the sender of the recorded private text update


@pytest.fixture
def env(db_path, monkeypatch, ash_home):
    """A migrated database and a bot whose owner is USER and who also allows @candyflipline."""
    point_at_fake_bot_api(monkeypatch, ash_home, f"[telegram]\nallowed_users = [{USER}, '@candyflipline']\n")
    return db_path


@pytest.fixture
async def runtime(env):
    async with httpx.AsyncClient() as http:
        yield make_runtime(http)
