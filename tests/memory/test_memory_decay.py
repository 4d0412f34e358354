"""Seed 001's lessons: saving a fact again reinforces it; facts Ash extracted by itself decay
until gc retires them (audited, reversible); what a person asked to remember never decays."""

from __future__ import annotations

from lib.db import now_iso
from lib.memory import api, decay, gc, knowledge, reinforce
from tests.support.memory_retrieval import open_db
from tests.support.memory_surfaces import make_settings

USER = "1001"
DECAY = "[memory]\ndecay_per_week = 0.1\nretire_below = 0.1\nreinforcement_rate = 0.5\n"


def aged(conn, memory_id: int, weeks: float) -> None:
    """Pretend the entry was stored `weeks` ago and never used since."""
    conn.execute(
        "UPDATE memories SET created_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?) WHERE id = ?",
        (f"-{int(weeks * 7)} days", memory_id),
    )


def test_same_fingerprint_or_near_duplicate_reinforces_instead_of_copying(ash_home):
    settings = make_settings(ash_home, '[embeddings]\nprovider = "none"\n' + DECAY)
    conn = open_db(settings)
    first = reinforce.save(conn, settings, "Prefers green tea in the morning", owner_user_id=USER, source="tool")
    conn.execute("UPDATE memories SET confidence = 0.6 WHERE id = ?", (first.id,))
    again = reinforce.save(conn, settings, "prefers green tea, in the morning!", owner_user_id=USER, source="tool")
    near = reinforce.save(conn, settings, "Prefers green tea in the morning always", owner_user_id=USER, source="mcp")
    other = reinforce.save(conn, settings, "Prefers black coffee at night", owner_user_id=USER, source="tool")
    someone_else = reinforce.save(
        conn, settings, "Prefers green tea in the morning", owner_user_id="2002", source="tool"
    )

    assert again == reinforce.Saved(first.id, reinforced=True) and near == again
    assert not other.reinforced and not someone_else.reinforced
    entry = conn.execute("SELECT confidence, reinforced_count FROM memories WHERE id = ?", (first.id,)).fetchone()
    assert entry == (0.6 + 0.5 * 0.4 + 0.5 * (1 - 0.8), 2)  # 0.6 -> 0.8 -> 0.9: confidence rises
    assert conn.execute("SELECT count(*) FROM memories WHERE owner_user_id = ?", (USER,)).fetchone()[0] == 2


def test_extracted_fact_decays_and_gc_retires_it_audited_and_restorable(ash_home):
    settings = make_settings(ash_home, '[embeddings]\nprovider = "none"\n' + DECAY)
    conn = open_db(settings)
    extracted = knowledge.add(
        conn, settings, "Works night shifts at the bakery", owner_user_id=USER, confidence=0.8, source="extraction"
    )
    asked = knowledge.add(conn, settings, "Bakery alarm code is 1357", owner_user_id=USER, source="tool")
    fresh = knowledge.add(
        conn, settings, "Plays the bakery cello", owner_user_id=USER, confidence=0.8, source="extraction"
    )
    for memory_id in (extracted, asked):
        aged(conn, memory_id, weeks=8)  # 0.8 - 8 x 0.1 = 0: below retire_below

    assert gc.collect(conn, settings)["retired"] == 1
    row = conn.execute("SELECT retired_at FROM memories WHERE id = ?", (extracted,)).fetchone()
    assert row[0] is not None  # kept, not deleted
    found = api.retrieve_context(conn, settings, user_id=USER, query="bakery night shifts")
    assert extracted not in {r.id for r in found} and asked in {r.id for r in found} and fresh in {r.id for r in found}
    assert extracted not in {e.id for e in knowledge.list_entries(conn, owner_user_id=USER)}
    actions = [r[0] for r in conn.execute("SELECT action FROM audit_log ORDER BY id")]
    assert actions[-1] == "memory_retire"

    assert decay.restore(conn, settings, extracted, actor="cli")
    found = api.retrieve_context(conn, settings, user_id=USER, query="bakery night shifts")
    assert extracted in {r.id for r in found}
    assert [r[0] for r in conn.execute("SELECT action FROM audit_log ORDER BY id")][-1] == "memory_restore"
    assert not decay.restore(conn, settings, asked, actor="cli")  # never retired


def test_retrieval_and_reinforcement_reset_the_decay_clock(ash_home):
    settings = make_settings(ash_home, '[embeddings]\nprovider = "none"\n' + DECAY)
    conn = open_db(settings)
    used = knowledge.add(
        conn, settings, "Keeps a sourdough starter called Gus", owner_user_id=USER, confidence=0.8, source="extraction"
    )
    aged(conn, used, weeks=8)
    assert [r.id for r in api.retrieve_context(conn, settings, user_id=USER, query="sourdough starter Gus")] == [used]
    assert gc.collect(conn, settings)["retired"] == 0

    later = now_iso()
    assert decay.effective_confidence(0.8, "2026-01-01T00:00:00.000Z", settings, now="2026-01-15T00:00:00.000Z") == (
        0.8 - 0.2
    )
    assert decay.effective_confidence(0.8, later, settings, now=later) == 0.8
