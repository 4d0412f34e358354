"""Shared by the ranking tests of this folder."""

from __future__ import annotations

from contextlib import closing

import pytest

from tests.support.memory_retrieval import open_db, settings_with


@pytest.fixture
def db(ash_home):
    """(settings, connection) over a real, migrated SQLite file with embeddings off: full-text
    ranking alone, so what moves in a test is the step it is about."""
    settings = settings_with(ash_home, '[embeddings]\nprovider = "none"\n')
    with closing(open_db(settings)) as conn:
        yield settings, conn
