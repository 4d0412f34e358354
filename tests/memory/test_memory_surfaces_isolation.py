"""Isolation: what user A told Ash in private never reaches user B, in B's private chat or a shared group.

Runs with the local embedding model so both the FTS5 and the vector paths are exercised.
"""

from __future__ import annotations

import pytest

from lib.db import Database
from lib.memory import knowledge, store
from lib.memory.api import record_turn, retrieve_context
from lib.tools.base import ToolContext
from lib.tools.memory_tools import TOOLS, Forget, Recall, Remember
from lib.tools.registry import available_tools
from tests.support.memory_retrieval import open_db
from tests.support.memory_surfaces import LOCAL_EMBEDDINGS, make_settings

SECRETS = ("Bluefinch", "7391")
GROUP = "-100777"


def turn(conn, settings, user_id: str, chat_id: str, text: str, chat_type: str = "private") -> int:
    session = store.open_session(conn, "telegram", chat_id, user_id, chat_type)
    user_msg, _ = record_turn(
        conn, settings, session_id=session.id, user_id=user_id, user_text=text, answer_text="Understood."
    )
    return user_msg


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A told Ash secrets in private; A and B talk in a group; B has their own private chat."""
    home = tmp_path_factory.mktemp("isolation")
    mp = pytest.MonkeyPatch()
    mp.setenv("ASH_HOME", str(home))
    settings = make_settings(home, LOCAL_EMBEDDINGS + "[memory]\nextraction_enabled = false\n")
    conn = open_db(settings)
    turn(conn, settings, "1", "1", "My secret project is codenamed Bluefinch and my bank PIN is 7391.")
    knowledge.add(conn, settings, "The user's secret project is codenamed Bluefinch", owner_user_id="1")
    knowledge.add(conn, settings, "Team lunch is on Fridays", owner_user_id=None, is_global=True)
    turn(conn, settings, "1", GROUP, "Hello everyone, shall we plan the hiking trip?", "group")
    turn(conn, settings, "2", GROUP, "Yes! I can bring the tent for the hiking trip.", "group")
    turn(conn, settings, "2", "2", "Remind me what my secret project and bank PIN are?")
    knowledge.add(conn, settings, "The user's own project is called Kestrel", owner_user_id="2")
    yield settings, conn
    conn.close()
    mp.undo()


QUERIES = [
    "secret project codename",
    "Bluefinch",
    "bank PIN number",
    "what is my PIN 7391",
]


@pytest.mark.parametrize("query", QUERIES)
def test_context_for_b_never_holds_a_private_facts(world, query):
    settings, conn = world
    results = retrieve_context(conn, settings, user_id="2", query=query, token_budget=10_000)
    text = "\n".join(r.content for r in results)
    assert not any(secret in text for secret in SECRETS), text


def test_context_for_a_does_find_a_private_facts(world):
    """The same queries do reach A: the isolation tests above are not passing by finding nothing."""
    settings, conn = world
    results = retrieve_context(conn, settings, user_id="1", query="secret project codename", token_budget=10_000)
    assert any("Bluefinch" in r.content for r in results)


def test_b_sees_own_and_global_knowledge(world):
    settings, conn = world
    own = retrieve_context(conn, settings, user_id="2", query="what is my project called?", token_budget=10_000)
    shared = retrieve_context(conn, settings, user_id="2", query="when is team lunch?", token_budget=10_000)
    assert "Kestrel" in "\n".join(r.content for r in own)
    assert "Team lunch" in "\n".join(r.content for r in shared)


def _context(settings, user_id: str, chat_id: str, is_owner: bool = False) -> ToolContext:
    db = Database(settings.database_path)
    return ToolContext(
        user_id=user_id,
        chat_id=chat_id,
        session_id=None,
        is_owner=is_owner,
        settings=settings,
        db=db,
    )


@pytest.mark.parametrize("chat_id", ["2", GROUP])
async def test_recall_tool_for_b_never_returns_a_private_facts(world, chat_id):
    settings, _ = world
    context = _context(settings, "2", chat_id)
    for query in QUERIES:
        result = await Recall().execute(Recall.Input(query=query), context)
        assert not any(secret in result.output for secret in SECRETS), result.output
    own = await Recall().execute(Recall.Input(query="Kestrel project"), context)
    assert "Kestrel" in own.output


async def test_forget_tool_cannot_delete_another_users_memory(world):
    settings, conn = world
    a_entry = knowledge.list_entries(conn, owner_user_id="1")[0]
    result = await Forget().execute(Forget.Input(id=a_entry.id), _context(settings, "2", "2"))
    assert result.is_error and knowledge.get(conn, a_entry.id) is not None
    by_query = await Forget().execute(Forget.Input(query="Bluefinch"), _context(settings, "2", "2"))
    assert by_query.is_error and knowledge.get(conn, a_entry.id) is not None


async def test_remember_recall_forget_round_trip(ash_home):
    settings = make_settings(ash_home)
    conn = open_db(settings)
    context = _context(settings, "5", "5")
    assert [t.name for t in TOOLS] == ["remember", "recall", "forget"]
    assert {"remember", "recall", "forget"} <= {t.name for t in available_tools(settings)}

    saved = await Remember().execute(
        Remember.Input(content="Passport renewal appointment at the consulate", expires_at="14d"), context
    )
    assert not saved.is_error
    memory_id = saved.metadata["memory_id"]
    entry = knowledge.get(conn, memory_id)
    assert entry.owner_user_id == "5" and entry.source == "tool" and entry.expires_at is not None

    bad = await Remember().execute(Remember.Input(content="x", expires_at="whenever"), context)
    assert bad.is_error and "ISO 8601" in bad.output

    recalled = await Recall().execute(Recall.Input(query="passport consulate"), context)
    assert f"memory #{memory_id}" in recalled.output and "Passport renewal" in recalled.output

    gone = await Forget().execute(Forget.Input(query="passport appointment"), context)
    assert not gone.is_error and gone.metadata["memory_ids"] == [memory_id]
    assert knowledge.get(conn, memory_id) is None
    assert (await Forget().execute(Forget.Input(), context)).is_error
    conn.close()


def test_expired_knowledge_is_not_retrieved(ash_home):
    settings = make_settings(ash_home)
    conn = open_db(settings)
    knowledge.add(conn, settings, "Gate code is 4455 for the festival", owner_user_id="9", expires_at="2020-01-01")
    knowledge.add(conn, settings, "Gate code is 8822 for the new office", owner_user_id="9", expires_at="2999-01-01")
    text = "\n".join(r.content for r in retrieve_context(conn, settings, user_id="9", query="gate code"))
    assert "8822" in text and "4455" not in text
    conn.close()
