"""Fact extraction with a scripted model: threshold, supersession, debounce, malformed answers."""

from __future__ import annotations

import json
import time

import pytest

from lib.db import Database
from lib.errors import LLMError
from lib.memory import extraction, knowledge, store
from lib.memory.api import record_turn
from lib.memory.search import retrieval
from tests.support.memory_retrieval import open_db
from tests.support.memory_surfaces import make_settings

DEBOUNCE = 30.0


class ScriptedModel:
    """Answers extraction and supersession prompts from queues; records every prompt."""

    def __init__(self):
        self.extract_answers: list[str | Exception] = []
        self.check_answers: list[str] = []
        self.calls: list[tuple[str, str]] = []

    async def __call__(self, *, system: str, prompt: str, user_id: str) -> str:
        kind = "check" if system == extraction.CHECK_SYSTEM else "extract"
        self.calls.append((kind, prompt))
        answer = (self.check_answers if kind == "check" else self.extract_answers).pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


@pytest.fixture
def env(ash_home):
    settings = make_settings(ash_home)
    conn = open_db(settings)
    db = Database(settings.database_path)
    session = store.open_session(conn, "telegram", "1", "1", "private")
    yield settings, conn, db, session
    db.close()
    conn.close()


def turn(conn, settings, session, text: str) -> int:
    user_msg, _ = record_turn(conn, settings, session_id=session.id, user_id="1", user_text=text, answer_text="OK.")
    return user_msg


def later() -> float:
    return time.time() + DEBOUNCE + 1


def facts(*items: dict) -> str:
    return json.dumps({"facts": list(items)})


async def test_facts_above_threshold_are_stored_with_source_and_notes_below_are_dropped(env):
    settings, conn, db, session = env
    message = turn(conn, settings, session, "I live in Paris and I work as a baker at night.")
    model = ScriptedModel()
    model.extract_answers.append(
        "Here you go:\n```json\n"
        + facts(
            {"content": "The user lives in Paris.", "subject": "home city", "confidence": 0.9, "message_id": message},
            {"content": "The user might enjoy jazz.", "subject": "music", "confidence": 0.4},
        )
        + "\n```"
    )

    # Not due yet: the debounce has not passed, the model is not asked.
    assert await extraction.run_due(db, settings, model, now=time.time()) == []
    [report] = await extraction.run_due(db, settings, model, now=later())

    assert report.dropped == 1 and len(report.stored) == 1
    entry = knowledge.get(conn, report.stored[0])
    assert (entry.content, entry.source, entry.source_message_id) == ("The user lives in Paris.", "extraction", message)
    assert entry.confidence == 0.9 and entry.subject == "home city"
    assert "jazz" not in json.dumps([e.content for e in knowledge.list_entries(conn, include_inactive=True)])
    assert store.get_profile(conn, "1").notes == "- The user lives in Paris."
    assert "I live in Paris" in model.calls[0][1]
    assert conn.execute("SELECT count(*) FROM extraction_queue").fetchone()[0] == 0
    # Nothing new: the next pass asks nothing.
    assert await extraction.run_due(db, settings, model, now=later()) == []


async def test_a_contradicting_fact_supersedes_the_old_one(env):
    settings, conn, db, session = env
    turn(conn, settings, session, "I live in Paris these days, near the canal.")
    model = ScriptedModel()
    model.extract_answers.append(
        facts({"content": "The user lives in Paris.", "subject": "home city", "confidence": 0.9})
    )
    [first] = await extraction.run_due(db, settings, model, now=later())
    paris = first.stored[0]

    moved = turn(conn, settings, session, "Big news: I moved to Berlin last month!")
    model.extract_answers.append(
        facts({"content": "The user lives in Berlin.", "subject": "home city", "confidence": 0.95, "message_id": moved})
    )
    model.check_answers.append(json.dumps({"supersedes": [paris, 99999]}))
    [second] = await extraction.run_due(db, settings, model, now=later())

    berlin = second.stored[0]
    assert second.superseded == {paris: berlin}
    old = knowledge.get(conn, paris)
    assert old is not None and old.superseded_by == berlin and old.superseded_at
    assert knowledge.get(conn, berlin).metadata["supersedes"] == [paris]
    # The check saw the old fact as a candidate; only offered ids are accepted (99999 ignored).
    check_prompt = next(p for kind, p in model.calls if kind == "check")
    assert f"[{paris}] The user lives in Paris." in check_prompt
    # Retrieval excludes the superseded fact unless asked for history.
    found = retrieval.search_knowledge(conn, settings, user_id="1", query="where does the user live")
    assert [r.id for r in found] == [berlin]
    history = retrieval.search_knowledge(conn, settings, user_id="1", query="lives", include_superseded=True)
    assert {r.id for r in history} == {paris, berlin}
    assert store.get_profile(conn, "1").notes == "- The user lives in Berlin."


async def test_malformed_model_answers_store_nothing_and_do_not_raise(env):
    settings, conn, db, session = env
    turn(conn, settings, session, "I have been learning the cello for three years.")
    model = ScriptedModel()
    model.extract_answers.append('Sure! {"facts": [{"content": 42, "confidence": "high"}, "nope", {"content": "x"')
    [report] = await extraction.run_due(db, settings, model, now=later())
    assert report.stored == [] and report.error is None
    assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM extraction_queue").fetchone()[0] == 0


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ('{"facts": [{"content": "A", "confidence": 0.8}]}', ["A"]),
        ('[{"content": "B", "confidence": 1}]', ["B"]),
        ('{"facts": [{"content": "C", "confidence": 7}]}', []),
        ("no json at all", []),
        ('{"facts": "oops"}', []),
        ("", []),
    ],
)
def test_parse_facts_tolerates_shapes(answer, expected):
    assert [f.content for f in extraction.parse_facts(answer)] == expected


async def test_model_failure_keeps_the_user_queued_for_later(env):
    settings, conn, db, session = env
    turn(conn, settings, session, "My daughter's name is Ines and she is seven.")
    model = ScriptedModel()
    model.extract_answers.append(LLMError("overloaded", provider="anthropic", status=529, retryable=True))
    [report] = await extraction.run_due(db, settings, model, now=later())
    assert report.error and "overloaded" in report.error
    row = conn.execute("SELECT due_at FROM extraction_queue WHERE user_id = '1'").fetchone()
    assert row is not None and row[0] > time.time()


async def test_short_messages_are_not_queued_and_extraction_can_be_turned_off(ash_home):
    settings = make_settings(ash_home, '[embeddings]\nprovider = "none"\n[memory]\nextraction_enabled = false\n')
    conn = open_db(settings)
    session = store.open_session(conn, "telegram", "1", "1", "private")
    turn(conn, settings, session, "ok")
    turn(conn, settings, session, "This one is long enough to be looked at later.")
    assert conn.execute("SELECT count(*) FROM extraction_queue").fetchone()[0] == 0
    conn.close()


async def test_messages_arriving_during_the_debounce_join_one_extraction(env):
    settings, conn, db, session = env
    first = turn(conn, settings, session, "I started a new job at the observatory.")
    due_before = conn.execute("SELECT due_at FROM extraction_queue").fetchone()[0]
    second = turn(conn, settings, session, "I also adopted a greyhound called Comet.")
    due_after, through = conn.execute("SELECT due_at, through_message_id FROM extraction_queue").fetchone()
    assert due_after == due_before and through == second
    model = ScriptedModel()
    model.extract_answers.append(facts())
    await extraction.run_due(db, settings, model, now=later())
    assert len(model.calls) == 1
    assert f"message_id {first}" in model.calls[0][1] and f"message_id {second}" in model.calls[0][1]
