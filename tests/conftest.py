"""Shared fixtures: an isolated ASH_HOME, a migrated database, settings from a clean environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from lib.config import load_settings
from lib.db import connect
from lib.migrations import migrate
from tests.support.paths import FIXTURES

# Variables Ash reads; tests start from none of them so the developer's shell never leaks in.
ASH_ENV = (
    "ASH_HOME",
    "ASH_CONFIG",
    "PORT",
    "TELEGRAM_BOT_TOKEN",
    "TELEGRAM_WEBHOOK_SECRET",
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "BRAVE_SEARCH_API_KEY",
    "ASH_ADMIN_TOKEN",
    "TELEGRAM_API_BASE",
    "ANTHROPIC_BASE_URL",
    "OPENAI_BASE_URL",
    "BRAVE_API_BASE",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Every test gets its own ASH_HOME and none of the caller's Ash variables."""
    for name in ASH_ENV:
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "ash-home"
    monkeypatch.setenv("ASH_HOME", str(home))
    return home


@pytest.fixture
def ash_home(clean_env: Path) -> Path:
    """The test's ASH_HOME directory."""
    clean_env.mkdir(parents=True, exist_ok=True)
    return clean_env


@pytest.fixture
def settings(ash_home: Path):
    """Settings resolved from the test's clean environment."""
    return load_settings()


@pytest.fixture
def db_path(settings) -> Path:
    """The configured database path, migrated."""
    conn = connect(settings.database_path)
    migrate(conn)
    conn.close()
    return settings.database_path


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch):
    """Model retries wait no real time; the delays they asked for are recorded."""
    import lib.llm.router as router
    from tests.support.agent import RecordingSleep

    recorder = RecordingSleep()
    monkeypatch.setattr(router, "DEFAULT_POLICY", router.RetryPolicy(base_delay=0.5, sleep=recorder))
    return recorder


@pytest.fixture
def conn(db_path: Path):
    """A connection to a freshly migrated database."""
    connection = connect(db_path)
    yield connection
    connection.close()


def fixture_bytes(*parts: str) -> bytes:
    """Raw bytes of a file under tests/fixtures."""
    return FIXTURES.joinpath(*parts).read_bytes()


@pytest.fixture(scope="module")
def docker_client():
    """A docker SDK client for the engine the sandbox tests use (docker-marked tests only)."""
    from tests.support.sandbox import engine_client

    client = engine_client()
    yield client
    client.close()


@pytest.fixture
def chat_keys(docker_client):
    """Fresh sandbox chat keys for a test; their containers and workspaces are removed afterwards."""
    from lib.sandbox.layout import chat_key
    from tests.support.sandbox import cleanup, new_key

    made: list[str] = []

    def make() -> str:
        made.append(new_key())
        return made[-1]

    yield make
    # The bash tool names a chat's sandbox from (provider, chat id): clean those up too.
    cleanup(docker_client, *made, *(chat_key("test", key) for key in made))


@pytest.fixture
def bot():
    """A fake Bot API at https://tg.test (respx) recording what the bot sent and edited."""
    import respx

    from tests.support.telegram import FakeBotAPI

    with respx.mock(assert_all_called=False) as router:
        # A test's own servers on loopback (a web page for web_fetch) are reached for real.
        router.route(host="127.0.0.1").pass_through()
        yield FakeBotAPI(router)
