"""Documents kept as knowledge (lib/memory/documents.py) in a real SQLite file: sections that name
the file and page, found again by words and by meaning with their untrusted mark, shown in the
prompt as data from that file, replaced when the same file comes again, and forgotten with the
rest by /forget."""

from __future__ import annotations

from lib.agent import TurnInput
from lib.agent.prompt import build_system_prompt
from lib.db import connect, rows
from lib.memory import knowledge
from lib.memory.documents import content_sha256, keep_document, sections_of
from lib.memory.forget import forget_user
from lib.memory.search import index
from lib.memory.search.retrieval import search_knowledge
from lib.migrations import migrate
from tests.support.memory_surfaces import LOCAL_EMBEDDINGS, make_settings

OWNER = "1001"
PARTS = [
    ("page 1", "Lighthouse restoration report. Prepared for the harbour board."),
    ("page 2", "The lantern room needs new glazing: twelve panes."),
    ("page 3", "Budget: the restoration costs 4,200 euros in total."),
]


def open_db(settings):
    conn = connect(settings.database_path)
    migrate(conn)
    return conn


def keep(conn, settings, *, owner=OWNER, parts=PARTS, name="report.pdf", data=b"report-v1", file_id="AgADrep"):
    return keep_document(
        conn,
        settings,
        owner=owner,
        name=name,
        parts=parts,
        sha256=content_sha256(data),
        file_unique_id=file_id,
        sent_by=OWNER,
        pages=3,
        max_chars=400_000,
        embed=False,
    )


def documents(conn) -> list[dict]:
    return rows(conn, "SELECT id, content, owner_user_id FROM memories WHERE source = 'document' ORDER BY id")


def test_each_section_names_its_file_and_page_and_fits_one_chunk(ash_home):
    long_page = " ".join(f"Sentence {n} about the harbour wall." for n in range(200))
    sections = sections_of("report.pdf", [("page 1", "Short."), ("page 2", long_page)], max_chars=400_000)

    assert sections[0] == ("page 1", "[report.pdf, page 1] Short.")
    assert len(sections) > 3 and all(text.startswith("[report.pdf, page 2] ") for _, text in sections[1:])
    assert max(len(text) for _, text in sections) <= 1000


def test_at_most_max_chars_of_the_document_are_kept(ash_home):
    sections = sections_of("big.txt", [(None, "a" * 900), (None, "b" * 900)], max_chars=1000)

    kept = "".join(text.removeprefix("[big.txt] ") for _, text in sections)
    assert kept == "a" * 900 + "b" * 100


def test_a_kept_document_is_found_by_its_words_with_the_untrusted_mark(ash_home):
    settings = make_settings(ash_home)
    conn = open_db(settings)
    keep(conn, settings)

    found = search_knowledge(conn, settings, user_id=OWNER, query="restoration budget euros", mode="fts")

    best = found[0]
    assert best.content == "[report.pdf, page 3] Budget: the restoration costs 4,200 euros in total."
    assert best.metadata["untrusted"] is True
    assert best.metadata["file"] == "report.pdf"
    assert best.metadata["source"] == "document" and best.metadata["part"] == "page 3"
    # Nobody else's memory holds it.
    assert search_knowledge(conn, settings, user_id="2002", query="restoration budget euros", mode="fts") == []


def test_the_vector_path_carries_the_mark_too(ash_home):
    settings = make_settings(ash_home, LOCAL_EMBEDDINGS)
    conn = open_db(settings)
    keep(conn, settings)  # full-text rows now; the vectors come with the memory service's pass
    assert rows(conn, "SELECT count(*) AS n FROM search_chunks WHERE embedded = 0")[0]["n"] == 3

    assert index.backfill_vectors(conn, settings) == 3
    found = search_knowledge(conn, settings, user_id=OWNER, query="How much money does the repair need?", mode="vector")

    assert found, "the vector search found nothing"
    assert all(r.metadata["untrusted"] is True and r.metadata["file"] == "report.pdf" for r in found)


def test_the_prompt_shows_a_retrieved_section_as_data_from_its_file(ash_home):
    settings = make_settings(ash_home)
    conn = open_db(settings)
    keep(conn, settings, name='q3 "final".pdf')
    found = search_knowledge(conn, settings, user_id=OWNER, query="restoration budget euros", mode="fts")[:1]

    system = build_system_prompt(
        settings, TurnInput("telegram", OWNER, OWNER, "budget?"), profile=None, retrieved=found
    )

    assert '<item source="document" file="q3 &quot;final&quot;.pdf" date="' in system
    assert "4,200 euros" in system
    assert "<document>" in system.split("## This conversation")[1]  # the data rule names the frame


def test_the_same_file_sent_again_replaces_its_sections(ash_home):
    settings = make_settings(ash_home)
    conn = open_db(settings)
    keep(conn, settings)
    newer = [("page 1", "Revised report: the budget is now 5,000 euros.")]

    keep(conn, settings, parts=newer, data=b"report-v2")  # same file_unique_id, new bytes
    assert [d["content"] for d in documents(conn)] == [
        "[report.pdf, page 1] Revised report: the budget is now 5,000 euros."
    ]

    keep(conn, settings, parts=PARTS, data=b"report-v2", file_id="AgADother")  # same bytes, another upload
    assert len(documents(conn)) == 3
    assert rows(conn, "SELECT 1 FROM search_fts WHERE search_fts MATCH 'revised'") == []
    # The same file in another chat's memory is a copy of its own, not a replacement.
    keep(conn, settings, owner="chat:-100123")
    assert len(documents(conn)) == 6


def test_memory_listings_and_extraction_leave_document_sections_out(ash_home):
    settings = make_settings(ash_home)
    conn = open_db(settings)
    keep(conn, settings)
    knowledge.add(conn, settings, "Ada restores lighthouses.", owner_user_id=OWNER)

    assert [f.content for f in knowledge.active_facts(conn, OWNER)] == ["Ada restores lighthouses."]
    assert "4,200" not in knowledge.describe_user(conn, settings, OWNER)


def test_forget_deletes_document_sections_and_their_index_rows(ash_home):
    settings = make_settings(ash_home)
    conn = open_db(settings)
    keep(conn, settings)
    keep(conn, settings, owner="chat:-100123")  # the group's copy is the group's

    counts = forget_user(conn, settings, OWNER, "test")

    assert counts["memories"] == 3
    assert [d["owner_user_id"] for d in documents(conn)] == ["chat:-100123"] * 3
    owned = "SELECT count(*) AS n FROM search_chunks WHERE owner_user_id = ?"
    assert rows(conn, owned, (OWNER,))[0]["n"] == 0
    assert search_knowledge(conn, settings, user_id=OWNER, query="restoration budget euros", mode="fts") == []
