"""Consolidation (lib/memory/consolidate.py): duplicate facts found by deterministic checks, merged
only after review under "propose", at once under "auto", never under "off"; undoable; the
memory service's daily pass runs it. Also `ash memory review`."""

from __future__ import annotations

import asyncio

import apsw
import pytest
from click.testing import CliRunner

import lib.migrations as migrate
from lib.commands.cli import cli
from lib.db import Database, connect
from lib.memory import audit, consolidate, knowledge, undo
from lib.memory.service import MemoryService
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


def test_auto_merges_at_once_off_does_nothing_and_the_daily_pass_runs_it(ash_home):
    settings = make_settings(ash_home, NO_EMBEDDINGS + '[memory]\nconsolidate = "off"\n')
    conn = open_db(settings)
    ids = seed(conn, settings)
    assert consolidate.propose(conn, settings) == {"proposed": 0, "applied": 0}

    settings = make_settings(ash_home, NO_EMBEDDINGS + '[memory]\nconsolidate = "auto"\n')
    db = Database(settings.database_path)

    async def no_model(**_):
        raise AssertionError("consolidation's duplicate checks need no model")

    asyncio.run(MemoryService(db, settings, complete=no_model).daily())
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
    listed = runner.invoke(cli, ["memory", "review"]).output
    assert f"keep #{ids['tea']}: Likes green tea in the morning" in listed
    assert f"drop #{ids['tea_again']}" in listed
    applied = runner.invoke(cli, ["memory", "review", "--apply-all"])
    assert applied.exit_code == 0 and applied.output.count("applied proposal") == 2
    assert not active(conn, ids["tea_again"]) and not active(conn, ids["cello_near"])


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
