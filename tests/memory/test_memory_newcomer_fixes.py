"""What a newcomer saw: `ash memory search` and the web view's search listed every entry, unrelated
ones with high scores; `/memory` said each extracted fact twice; a document sent with a question
came back as "remembered" sections in the same turn. Real SQLite file; vectors from a stand-in
embedder whose texts are close only when they share words, so "unrelated" is certain."""

from __future__ import annotations

from contextlib import closing

import pytest
from click.testing import CliRunner

from lib.agent.prompt import not_sent_now
from lib.commands.cli import cli
from lib.memory import knowledge, store
from lib.memory.api import retrieve_context
from lib.memory.documents import content_sha256, keep_document
from lib.memory.search import e5, retrieval
from lib.web.ui import pages
from tests.memory.test_memory_long_turns import CountingEmbedder
from tests.support.memory_retrieval import open_db
from tests.support.memory_surfaces import make_settings

OWNER = "1001"
ENTRIES = ["Alice keeps bees on her roof", "The boiler is serviced every October", "Parking permit number 4471"]


@pytest.fixture
def memory(ash_home, monkeypatch):
    monkeypatch.setattr(e5.E5Embedder, "embed", CountingEmbedder.embed)
    settings = make_settings(ash_home, '[embeddings]\nprovider = "local"\n[memory]\nextraction_enabled = false\n')
    with closing(open_db(settings)) as conn:
        store.touch_profile(conn, OWNER, "alice", "Alice")
        for text in ENTRIES:
            knowledge.add(conn, settings, text, owner_user_id=OWNER, source="cli")
        yield settings, conn


def test_memory_search_lists_only_what_matches_or_says_nothing_did(memory, monkeypatch):
    run = CliRunner().invoke
    assert "bees" in run(cli, ["memory", "search", "where are the bees kept"]).output
    unrelated = run(cli, ["memory", "search", "quantum chromodynamics lecture"]).output
    assert "nothing found" in unrelated and "bees" not in unrelated and "boiler" not in unrelated
    # Without the floor, the vectors' nearest entries come back for anything.
    unfloored = retrieval.search_knowledge
    monkeypatch.setattr(retrieval, "search_knowledge", lambda *a, **kw: unfloored(*a, **{**kw, "floor": False}))
    monkeypatch.setattr("lib.memory.api.search_knowledge", retrieval.search_knowledge)
    assert "nothing found" not in run(cli, ["memory", "search", "quantum chromodynamics lecture"]).output


def test_the_web_views_search_lists_only_what_matches(memory, monkeypatch):
    settings, conn = memory
    found = pages.person(conn, settings, OWNER, "when is the boiler serviced")["entries"]
    assert [e.content for e in found] == ["The boiler is serviced every October"]
    assert pages.person(conn, settings, OWNER, "quantum chromodynamics lecture")["entries"] == []


def test_memory_says_each_extracted_fact_once(memory):
    settings, conn = memory
    fact = knowledge.add(conn, settings, "Allergic to penicillin", owner_user_id=OWNER, source="extraction")
    store.set_notes(conn, OWNER, "- Allergic to penicillin\n- Prefers mornings")

    text = knowledge.describe_user(conn, settings, OWNER)

    assert text.count("penicillin") == 1 and f"#{fact} Allergic to penicillin" in text
    assert "Notes:\n- Prefers mornings" in text


def test_a_document_sent_with_a_question_does_not_come_back_as_remembered(memory):
    settings, conn = memory
    parts = [("page 1", "The lighthouse lantern needs twelve new panes of glass.")]
    keep_document(
        conn, settings, owner=OWNER, name="report.pdf", parts=parts, sha256=content_sha256(b"r"), max_chars=10_000
    )
    keep_document(
        conn,
        settings,
        owner=OWNER,
        name="old.pdf",
        parts=[("page 1", "The lighthouse lantern was painted.")],
        sha256=content_sha256(b"o"),
        max_chars=10_000,
    )
    turn_text = "How many panes? [report.pdf] The lighthouse lantern needs twelve new panes of glass."
    found = retrieve_context(conn, settings, user_id=OWNER, query=turn_text)
    assert any(r.metadata.get("file") == "report.pdf" for r in found)

    kept = not_sent_now(found, ("document report.pdf",))

    assert not any(r.metadata.get("file") == "report.pdf" for r in kept)
    assert any(r.metadata.get("file") == "old.pdf" for r in kept)  # another file is memory
