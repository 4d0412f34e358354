"""Consolidation (lib/memory/consolidate.py): duplicate facts found by deterministic checks, merged
only after review under "propose", at once under "auto", never under "off"; a contradicted fact
superseded and a stale one expired only when applied; each undoable to the exact prior state; the
memory service's daily pass runs it. Also `ash memory review`, and m018's rebuilt table."""

from __future__ import annotations

import asyncio

import apsw
import pytest
from click.testing import CliRunner

import lib.migrations as migrate
from lib.commands.cli import cli
from lib.db import Database, connect
from lib.memory import audit, consolidate, knowledge, store, undo
from lib.memory.api import search_knowledge
from lib.memory.service import MemoryService
from tests.memory.test_memory_undo import snapshot
from tests.support.memory_retrieval import open_db
from tests.support.memory_surfaces import NO_EMBEDDINGS, make_settings

USER = "1001"


def seed(conn, settings) -> dict:
    def add(text: str, **kw) -> int:
        return knowledge.add(conn, settings, text, owner_user_id=kw.pop("owner", USER), source="cli", **kw)

    return {
        "tea": add("Likes green tea in the morning", confidence=0.9),
        "tea_again": add("likes green tea, in the morning!", confidence=0.6),
        "cello": add("Plays the cello in an amateur orchestra"),
        "cello_near": add("Plays the cello in an amateur orchestra on Tuesdays", confidence=0.8),
        "bike": add("Owns a blue Brompton bike"),
        "other": add("Likes green tea in the morning", owner="2002"),
    }


def active(conn, memory_id: int) -> bool:
    return knowledge.get(conn, memory_id).active


def test_propose_changes_nothing_until_applied_and_skip_is_remembered(ash_home):
    settings = make_settings(ash_home, NO_EMBEDDINGS)
    conn = open_db(settings)
    ids = seed(conn, settings)
    assert consolidate.propose(conn, settings) == {"proposed": 2, "applied": 0}
    proposals = {(p["keep_id"], p["drop_id"]): p for p in consolidate.open_proposals(conn)}
    assert set(proposals) == {(ids["tea"], ids["tea_again"]), (ids["cello"], ids["cello_near"])}
    assert proposals[(ids["tea"], ids["tea_again"])]["similarity"] == 1.0
    assert all(active(conn, i) for i in ids.values())  # nothing changed yet; another owner's copy is no duplicate

    tea = proposals[(ids["tea"], ids["tea_again"])]["id"]
    assert consolidate.apply(conn, settings, tea, actor="cli") is None
    assert knowledge.get(conn, ids["tea_again"]).superseded_by == ids["tea"] and active(conn, ids["tea"])
    assert consolidate.apply(conn, settings, tea, actor="cli") == f"proposal #{tea} is not open"
    cello = proposals[(ids["cello"], ids["cello_near"])]["id"]
    assert consolidate.skip(conn, cello)
    # A later pass proposes neither again.
    assert consolidate.propose(conn, settings) == {"proposed": 0, "applied": 0}
    assert active(conn, ids["cello_near"])

    # Applying is an audited supersession that undo takes back.
    [merge] = [e for e in audit.history(conn, ids["tea_again"]) if e.action == "memory_supersede"]
    assert merge.actor == "cli" and merge.detail["proposal"] == tea
    assert undo.undo(conn, settings, merge.id, actor="cli").ok
    assert active(conn, ids["tea_again"])


def found(conn, settings, query: str) -> list[int]:
    return [r.id for r in search_knowledge(conn, settings, user_id=USER, query=query)]


def test_a_supersession_and_an_expiry_change_nothing_until_applied_and_undo_restores_the_exact_state(ash_home):
    settings = make_settings(ash_home, NO_EMBEDDINGS)
    conn = open_db(settings)
    add = lambda text: knowledge.add(conn, settings, text, owner_user_id=USER, source="extraction")  # noqa: E731
    lyon, trip, porto = add("Lives in Lyon"), add("Flies to Tokyo on 14 February"), add("Lives in Porto")
    store.set_notes(conn, USER, "- Lives in Lyon\n- Flies to Tokyo on 14 February\n- Lives in Porto\n- Has a cat")
    before = snapshot(conn)

    assert consolidate.add_proposal(conn, settings, "supersede", owner=USER, keep=porto, drop=lyon) == (True, False)
    assert consolidate.add_proposal(conn, settings, "expire", owner=USER, drop=trip) == (True, False)
    assert consolidate.add_proposal(conn, settings, "expire", owner=USER, drop=trip) == (False, False)
    assert snapshot(conn) == before  # proposed, nothing changed
    contradicted, stale = consolidate.open_proposals(conn)
    assert consolidate.describe(conn, contradicted) == [
        "contradicted: the newer fact replaces the older",
        f"keep #{porto}: Lives in Porto (recorded {knowledge.get(conn, porto).created_at[:10]})",
        f"drop #{lyon}: Lives in Lyon (recorded {knowledge.get(conn, lyon).created_at[:10]})",
    ]
    assert consolidate.describe(conn, stale)[0] == "stale: no longer true, so it expires"
    assert consolidate.describe(conn, stale)[1].startswith(f"expire #{trip}: Flies to Tokyo on 14 February")
    assert found(conn, settings, "Lyon") == [lyon] and found(conn, settings, "Tokyo") == [trip]

    for proposal in (contradicted, stale):
        assert consolidate.apply(conn, settings, proposal["id"], actor="cli") is None
    assert found(conn, settings, "Lyon") == [] and found(conn, settings, "Tokyo") == []
    assert found(conn, settings, "Porto") == [porto]
    assert knowledge.get(conn, lyon).superseded_by == porto
    assert [k.id for k in knowledge.active_facts(conn, USER)] == [porto]
    assert store.get_profile(conn, USER).notes == "- Lives in Porto\n- Has a cat"
    assert consolidate.apply(conn, settings, stale["id"], actor="cli") == f"proposal #{stale['id']} is not open"

    # Each is audited with its proposal, and undo puts back exactly what was there, notes in place.
    [replaced] = [e for e in audit.history(conn, lyon) if e.action == "memory_supersede"]
    [retired] = [e for e in audit.history(conn, trip) if e.action == "memory_retire"]
    assert (replaced.actor, replaced.detail["proposal"], replaced.detail["reason"]) == (
        "cli",
        contradicted["id"],
        "contradicted",
    )
    assert (retired.actor, retired.detail["proposal"], retired.detail["reason"]) == ("cli", stale["id"], "stale")
    for change in (retired, replaced):
        done = undo.undo(conn, settings, change.id, actor="cli")
        assert done.ok, done.message
    assert snapshot(conn) == before
    assert found(conn, settings, "Lyon") == [lyon] and found(conn, settings, "Tokyo") == [trip]


def test_a_proposal_whose_entry_changed_since_is_skipped_not_applied(ash_home):
    settings = make_settings(ash_home, NO_EMBEDDINGS)
    conn = open_db(settings)
    ids = seed(conn, settings)
    consolidate.add_proposal(conn, settings, "expire", owner=USER, drop=ids["bike"])
    consolidate.add_proposal(conn, settings, "supersede", owner=USER, keep=ids["bike"], drop=ids["cello"])
    expire, supersede = consolidate.open_proposals(conn)
    assert consolidate.apply(conn, settings, expire["id"], actor="cli") is None
    # The entry to keep was retired meanwhile: replacing a fact by it would leave neither.
    assert consolidate.apply(conn, settings, supersede["id"], actor="cli").endswith("changed since; skipped")
    assert active(conn, ids["cello"]) and consolidate.open_proposals(conn) == []


def test_auto_merges_at_once_off_does_nothing_and_the_daily_pass_runs_it(ash_home):
    settings = make_settings(ash_home, NO_EMBEDDINGS + '[memory]\nconsolidate = "off"\n')
    conn = open_db(settings)
    ids = seed(conn, settings)
    assert consolidate.propose(conn, settings) == {"proposed": 0, "applied": 0}

    # consolidate_daily_tokens = 0: the duplicate checks alone, no model.
    settings = make_settings(ash_home, NO_EMBEDDINGS + '[memory]\nconsolidate = "auto"\nconsolidate_daily_tokens = 0\n')
    db = Database(settings.database_path)
    asked = []

    async def no_model(**question):
        asked.append(question)
        raise AssertionError("consolidation's duplicate checks need no model")

    asyncio.run(MemoryService(db, settings, complete=no_model).daily())
    assert asked == []
    assert not active(conn, ids["tea_again"]) and not active(conn, ids["cello_near"])
    assert active(conn, ids["tea"]) and active(conn, ids["cello"]) and active(conn, ids["bike"])
    assert consolidate.open_proposals(conn) == []
    db.close()


def test_ash_memory_review(ash_home):
    settings = make_settings(ash_home, NO_EMBEDDINGS)
    conn = open_db(settings)
    ids = seed(conn, settings)
    runner = CliRunner()
    assert runner.invoke(cli, ["memory", "review"]).output.strip() == "no proposals wait for review"
    scanned = runner.invoke(cli, ["memory", "review", "--scan"])
    assert scanned.exit_code == 0 and "proposed: 2, applied: 0" in scanned.output
    consolidate.add_proposal(conn, settings, "expire", owner=USER, drop=ids["bike"])
    listed = runner.invoke(cli, ["memory", "review"]).output
    assert f"{USER}: merge (similarity 1.00): the same fact said twice" in listed
    assert f"keep #{ids['tea']}: Likes green tea in the morning" in listed
    assert f"drop #{ids['tea_again']}" in listed
    assert f"{USER}: stale: no longer true, so it expires" in listed
    assert f"expire #{ids['bike']}: Owns a blue Brompton bike" in listed
    applied = runner.invoke(cli, ["memory", "review", "--apply-all"])
    assert applied.exit_code == 0 and applied.output.count("applied proposal") == 3
    assert not active(conn, ids["tea_again"]) and not active(conn, ids["cello_near"])
    assert [k.id for k in knowledge.active_facts(conn, USER)] == [ids["tea"], ids["cello"]]  # the bike retired


def test_m018_keeps_the_merge_proposals_made_before_it_and_admits_the_new_kinds(tmp_path):
    path = tmp_path / "old.db"
    conn = connect(path)
    names = [s.name for s in migrate.STEPS]
    migrate.migrate(conn, path, steps=migrate.STEPS[: names.index("m018_memory_proposal_kinds")])
    for memory_id in (1, 2, 3):
        conn.execute(
            "INSERT INTO memories (id, content, source, owner_user_id, created_at) VALUES (?, ?, 'cli', '5', ?)",
            (memory_id, f"fact {memory_id}", "2026-01-01T00:00:00.000Z"),
        )
    made = [
        (1, "5", "merge", 1, 2, 0.85, "open", "2026-01-02T00:00:00.000Z", None),
        (2, "5", "merge", 1, 3, 1.0, "skipped", "2026-01-02T00:00:00.000Z", "2026-01-03T00:00:00.000Z"),
    ]
    conn.executemany("INSERT INTO memory_proposals VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", made)
    migrate.migrate(conn, path)
    assert conn.execute("SELECT * FROM memory_proposals ORDER BY id").fetchall() == made

    insert = (
        "INSERT INTO memory_proposals (owner_user_id, kind, keep_id, drop_id, similarity, created_at) "
        "VALUES ('5', ?, ?, ?, ?, '2026-01-04T00:00:00.000Z')"
    )
    conn.execute(insert, ("supersede", 3, 2, None))
    conn.execute(insert, ("expire", None, 3, None))
    for wrong in [
        ("expire", None, 3, None),  # the same entry proposed to expire twice
        ("expire", 1, 3, None),  # an expiry keeps nothing
        ("merge", None, 2, 0.9),  # a merge keeps one
        ("supersede", 3, 1, 0.9),  # only a merge has a similarity
        ("forget", 3, 1, None),
    ]:
        with pytest.raises(apsw.ConstraintError):
            conn.execute(insert, wrong)
