"""Undo of each kind of audited change (lib/memory/undo.py): the exact prior state comes back,
rows, full-text index and vectors (the local embedding model), and the undo is audited once.
Also `ash memory pending` and `ash memory undo` through the CLI."""

from __future__ import annotations

from click.testing import CliRunner

from lib.commands.cli import cli
from lib.memory import audit, forget, knowledge, reinforce, review, store, undo
from lib.memory.search import vectors
from tests.support.memory_retrieval import open_db
from tests.support.memory_surfaces import LOCAL_EMBEDDINGS, NO_EMBEDDINGS, make_settings

USER = "1001"
WORDS = ("lyon", "porto", "cello", "figs", "teal")


def snapshot(conn) -> dict:
    """What a reader of the memory sees: rows, notes, index chunks, FTS hits and vectors."""
    chunk_of = {r[0]: (r[1], r[2], r[3]) for r in conn.execute("SELECT id, kind, ref_id, ordinal FROM search_chunks")}
    vec = (
        sorted((chunk_of[r[0]], bytes(r[1])) for r in conn.execute(f"SELECT chunk_id, embedding FROM {vectors.TABLE}"))
        if vectors.exists(conn)
        else []
    )
    return {
        "memories": conn.execute("SELECT * FROM memories ORDER BY id").fetchall(),
        "notes": conn.execute("SELECT notes FROM user_profiles ORDER BY user_id").fetchall(),
        "chunks": sorted(
            conn.execute(
                "SELECT kind, ref_id, ordinal, owner_user_id, content, content_hash, embedded FROM search_chunks"
            ).fetchall()
        ),
        "fts": {
            word: sorted(
                chunk_of[r[0]] for r in conn.execute("SELECT rowid FROM search_fts WHERE search_fts MATCH ?", (word,))
            )
            for word in WORDS
        },
        "vectors": vec,
    }


def last_audit(conn, memory_id: int, action: str) -> int:
    found = undo.last_change(conn, memory_id, action)
    assert found is not None, action
    return found


def test_each_kind_of_change_is_undone_to_the_exact_prior_state(ash_home):
    settings = make_settings(ash_home, LOCAL_EMBEDDINGS)
    conn = open_db(settings)
    lyon = knowledge.add(conn, settings, "Lives in Lyon", owner_user_id=USER, source="extraction")
    store.set_notes(conn, USER, "- Lives in Lyon")
    assert vectors.count(conn) >= 1

    # add
    before = snapshot(conn)
    figs = knowledge.add(conn, settings, "Likes fresh figs", owner_user_id=USER, source="cli")
    assert snapshot(conn) != before
    done = undo.undo(conn, settings, last_audit(conn, figs, "memory_add"), actor="cli")
    assert done.ok, done.message
    assert snapshot(conn) == before

    # supersede (extraction's way: the old note line goes, the new one comes)
    porto = knowledge.add(conn, settings, "Lives in Porto", owner_user_id=USER, source="extraction")
    store.set_notes(conn, USER, "- Lives in Porto")
    conn.execute("UPDATE user_profiles SET notes = '- Lives in Lyon\n- Lives in Porto' WHERE user_id = ?", (USER,))
    before = snapshot(conn)
    knowledge.supersede(conn, lyon, porto)
    conn.execute("UPDATE user_profiles SET notes = '- Lives in Porto' WHERE user_id = ?", (USER,))
    assert undo.undo(conn, settings, last_audit(conn, lyon, "memory_supersede"), actor="cli").ok
    after = snapshot(conn)
    assert after["memories"] == before["memories"] and after["chunks"] == before["chunks"]
    assert after["fts"] == before["fts"] and after["vectors"] == before["vectors"]
    assert "Lives in Lyon" in after["notes"][0][0] and "Lives in Porto" in after["notes"][0][0]

    # keep and discard of pending entries
    teal = knowledge.add(conn, settings, "Favourite colour teal", owner_user_id=USER, status="pending", origin="web")
    for decide, action in ((review.keep, "memory_keep"), (review.discard, "memory_discard")):
        before = snapshot(conn)
        assert decide(conn, settings, teal, actor="cli") is not None
        assert snapshot(conn) != before
        assert undo.undo(conn, settings, last_audit(conn, teal, action), actor="cli").ok
        assert snapshot(conn) == before

    # reinforce
    before = snapshot(conn)
    assert reinforce.save(conn, settings, "Lives in Porto", owner_user_id=USER, source="cli").reinforced
    assert snapshot(conn) != before
    assert undo.undo(conn, settings, last_audit(conn, porto, "memory_reinforce"), actor="cli").ok
    assert snapshot(conn) == before

    # an undo is audited, and happens once
    add_id = last_audit(conn, figs, "memory_add")
    again = undo.undo(conn, settings, add_id, actor="cli")
    assert not again.ok and "undone already" in again.message
    undone = [e for e in audit.history(conn, figs) if e.action == "memory_undo"]
    assert [(e.actor, e.detail["undoes"]) for e in undone] == [("cli", add_id)]

    # a forget deleted the text: said so, nothing changes
    forget.forget_memory(conn, settings, USER, porto, "cli")
    before = snapshot(conn)
    refused = undo.undo(conn, settings, last_audit(conn, porto, "forget_memory"), actor="cli")
    assert not refused.ok and "no longer exists" in refused.message
    assert snapshot(conn) == before


def test_cli_lists_keeps_discards_and_undoes(ash_home):
    settings = make_settings(ash_home, NO_EMBEDDINGS)
    conn = open_db(settings)
    add = lambda text: knowledge.add(  # noqa: E731
        conn, settings, text, owner_user_id=USER, source="tool", origin="forward", status="pending"
    )
    kept, dropped = add("Plays the cello"), add("Owns a red bicycle")
    runner = CliRunner()
    listed = runner.invoke(cli, ["memory", "pending"])
    assert listed.exit_code == 0, listed.output
    assert f"#{kept} " in listed.output and "from forward" in listed.output and "Owns a red bicycle" in listed.output

    assert runner.invoke(cli, ["memory", "pending", "--keep", str(kept)]).exit_code == 0
    assert runner.invoke(cli, ["memory", "pending", "--discard", str(dropped)]).exit_code == 0
    assert knowledge.get(conn, kept).status == "active" and knowledge.get(conn, dropped).status == "discarded"
    assert runner.invoke(cli, ["memory", "pending"]).output.strip() == "nothing waits for review"
    twice = runner.invoke(cli, ["memory", "pending", "--keep", str(kept)])
    assert twice.exit_code == 1 and "is not pending" in twice.output

    history = runner.invoke(cli, ["memory", "history", str(kept)]).output
    keep_audit = int(history.splitlines()[-1].rsplit("#", 1)[1].rstrip("]"))
    undone = runner.invoke(cli, ["memory", "undo", str(keep_audit)])
    assert undone.exit_code == 0, undone.output
    assert "waits for review again" in undone.output
    assert knowledge.get(conn, kept).status == "pending"
    assert runner.invoke(cli, ["memory", "undo", "999999"]).exit_code == 1
