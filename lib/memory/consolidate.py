"""Consolidation: duplicate, contradicted and stale facts, changed after review by default.

Once a day (the memory service) each owner's active facts are compared with deterministic checks
first: the same words (reinforce.fingerprint) or nearly the same (Jaccard similarity of the word
sets of at least NEAR). A pair becomes a proposal to merge: the entry with more confidence (then
the older one) is kept and the other superseded by it, so retrieval shows the fact once. Then the
model pass (lib/memory/consolidate_model.py, within `[memory] consolidate_daily_tokens`) proposes
to supersede a fact a newer one contradicts, and to expire a stale one (a dated plan that has
passed): the entry is retired, kept but out of retrieval, as decay retires it.

`[memory] consolidate`: "propose" (the default) stores the proposals and changes nothing until one
is applied (`ash memory review`, /memory pending); "auto" applies them at once; "off" does
nothing. Applying is audited with the proposal's id and `ash memory undo` takes it back: a merge
or a supersession is a `memory_supersede` (reason duplicate or contradicted), an expiry a
`memory_retire`. A contradicted or stale fact Ash extracted also leaves its owner's profile notes,
as extraction's own supersessions do (otherwise the next prompt would still say it); undo puts the
line back.
"""

from __future__ import annotations

from itertools import combinations

import apsw

from lib.config import Settings
from lib.db import immediate, now_iso, one, rows
from lib.memory import correct, decay, knowledge, reinforce

ACTOR = "consolidate"
KINDS = ("merge", "supersede", "expire")
NEAR = 0.7
# Facts compared per owner in one pass (pairs grow with the square).
MAX_FACTS = 2000
# Characters of an entry a description shows.
SNIPPET = 160
FACTS_SQL = f"""
SELECT id, owner_user_id, is_global, content, confidence, created_at FROM memories
WHERE source != 'document' AND {knowledge.ACTIVE_SQL}
ORDER BY owner_user_id, id
"""
PROPOSE_SQL = """
INSERT OR IGNORE INTO memory_proposals (owner_user_id, kind, keep_id, drop_id, similarity, created_at)
VALUES (:owner, :kind, :keep, :drop, :similarity, :now)
"""
COLUMNS = "id, owner_user_id, kind, keep_id, drop_id, similarity, status, created_at"
OPEN_SQL = f"""
SELECT {COLUMNS} FROM memory_proposals
WHERE status = 'open' AND (:owner IS NULL OR owner_user_id = :owner) ORDER BY id
"""
GET_SQL = f"SELECT {COLUMNS} FROM memory_proposals WHERE id = ?"
DECIDE_SQL = "UPDATE memory_proposals SET status = :to, decided_at = :now WHERE id = :id AND status = 'open'"
# knowledge.get's `active` does not look at retirement: this does (knowledge.ACTIVE_SQL).
ACTIVE_ENTRY_SQL = f"SELECT 1 FROM memories WHERE id = :id AND {knowledge.ACTIVE_SQL}"
HEADS = {
    "merge": "merge (similarity {similarity:.2f}): the same fact said twice",
    "supersede": "contradicted: the newer fact replaces the older",
    "expire": "stale: no longer true, so it expires",
}


def _pairs(facts: list[dict]) -> list[tuple[dict, dict, float]]:
    """(kept, dropped, similarity) for every duplicate pair among one owner's facts."""
    found = []
    prints = {f["id"]: reinforce.fingerprint(f["content"]) for f in facts}
    for left, right in combinations(facts[:MAX_FACTS], 2):
        same = prints[left["id"]] == prints[right["id"]]
        score = 1.0 if same else reinforce.similarity(left["content"], right["content"])
        if score < NEAR:
            continue
        # More confidence wins, then the older entry (it has the longer history).
        keep, drop = sorted((left, right), key=lambda f: (-f["confidence"], f["created_at"], f["id"]))
        found.append((keep, drop, round(score, 3)))
    return found


def add_proposal(
    conn: apsw.Connection,
    settings: Settings,
    kind: str,
    *,
    owner: str | None,
    drop: int,
    keep: int | None = None,
    similarity: float | None = None,
) -> tuple[bool, bool]:
    """Store one proposal, applied at once under "auto": (stored, applied). Not stored when it
    was proposed before (and perhaps skipped): a skipped proposal is not made again."""
    params = {"owner": owner, "kind": kind, "keep": keep, "drop": drop, "similarity": similarity, "now": now_iso()}
    with immediate(conn):
        conn.execute(PROPOSE_SQL, params)
        if not conn.changes():
            return False, False
        if settings.config.memory.consolidate != "auto":
            return True, False
        return True, apply(conn, settings, conn.last_insert_rowid(), actor=ACTOR) is None


def propose(conn: apsw.Connection, settings: Settings) -> dict:
    """Find duplicate facts and store proposals (applied at once under "auto"); returns counts."""
    if settings.config.memory.consolidate == "off":
        return {"proposed": 0, "applied": 0}
    by_owner: dict[tuple, list[dict]] = {}
    for fact in rows(conn, FACTS_SQL, {"now": now_iso()}):
        by_owner.setdefault((fact["owner_user_id"], fact["is_global"]), []).append(fact)
    proposed = applied = 0
    with immediate(conn):
        for (owner, is_global), facts in by_owner.items():
            dropped: set[int] = set()
            for keep, drop, score in _pairs(facts):
                if drop["id"] in dropped or keep["id"] in dropped:
                    continue  # one merge per entry a pass: the next pass sees what is left
                who = None if is_global else owner
                stored, done = add_proposal(
                    conn, settings, "merge", owner=who, keep=keep["id"], drop=drop["id"], similarity=score
                )
                if stored:
                    proposed += 1
                    applied += done
                    dropped.add(drop["id"])
    return {"proposed": proposed, "applied": applied}


def open_proposals(conn: apsw.Connection, owner: str | None = None) -> list[dict]:
    """Proposals waiting for review, oldest first."""
    return rows(conn, OPEN_SQL, {"owner": owner})


def _active(conn: apsw.Connection, memory_id: int | None) -> bool:
    return memory_id is None or one(conn, ACTIVE_ENTRY_SQL, {"id": memory_id, "now": now_iso()}) is not None


def _forget_note(conn: apsw.Connection, entry: knowledge.Knowledge, actor: str) -> dict:
    """A fact Ash extracted is also a line of its owner's notes: it goes with the entry. Returns
    where it was (`note_line`, for undo to put it back there), or {} when there was none."""
    if entry.source != "extraction" or entry.owner_user_id is None:
        return {}
    at = correct.fact_note_index(conn, entry.owner_user_id, entry.content)
    if at is None:
        return {}
    correct.forget_fact_notes(conn, entry.owner_user_id, entry.content, actor)
    return {"note_line": at}


def _carry_out(conn: apsw.Connection, proposal: dict, actor: str) -> None:
    drop = knowledge.get(conn, proposal["drop_id"])
    because = {"proposal": proposal["id"]}
    if proposal["kind"] == "merge":
        # A duplicate's note line says what the entry kept says: the notes stay as they are.
        knowledge.supersede(conn, drop.id, proposal["keep_id"], actor=actor, reason="duplicate", **because)
    elif proposal["kind"] == "supersede":
        because |= _forget_note(conn, drop, actor)
        knowledge.supersede(conn, drop.id, proposal["keep_id"], actor=actor, reason="contradicted", **because)
    else:
        because |= _forget_note(conn, drop, actor)
        decay.retire(conn, drop.id, actor=actor, reason="stale", **because)


def apply(conn: apsw.Connection, settings: Settings, proposal_id: int, *, actor: str) -> str | None:
    """Carry out an open proposal: a merge or a supersession (the entry kept replaces the other),
    or an expiry (the stale entry is retired). None when done, else why not."""
    with immediate(conn):
        found = one(conn, GET_SQL, (proposal_id,))
        if found is None or found["status"] != "open":
            return f"proposal #{proposal_id} is not open"
        if not (_active(conn, found["keep_id"]) and _active(conn, found["drop_id"])):
            conn.execute(DECIDE_SQL, {"id": proposal_id, "to": "skipped", "now": now_iso()})
            return f"proposal #{proposal_id}: an entry changed since; skipped"
        _carry_out(conn, found, actor)
        conn.execute(DECIDE_SQL, {"id": proposal_id, "to": "applied", "now": now_iso()})
    return None


def skip(conn: apsw.Connection, proposal_id: int) -> bool:
    """Leave the entries as they are; the proposal is not made again."""
    with immediate(conn):
        conn.execute(DECIDE_SQL, {"id": proposal_id, "to": "skipped", "now": now_iso()})
        return bool(conn.changes())


def _said(conn: apsw.Connection, memory_id: int) -> str:
    entry = knowledge.get(conn, memory_id)
    if entry is None:
        return f"#{memory_id}: (forgotten)"
    text = " ".join(entry.content.split())
    text = text if len(text) <= SNIPPET else text[: SNIPPET - 1] + "…"
    return f"#{memory_id}: {text} (recorded {entry.created_at[:10]})"


def describe(conn: apsw.Connection, proposal: dict) -> list[str]:
    """A proposal in words for whoever reviews it: first what it is and why, then a line for
    each entry it keeps, drops or expires."""
    lines = [HEADS[proposal["kind"]].format(similarity=proposal["similarity"] or 0.0)]
    if proposal["keep_id"] is not None:
        lines.append(f"keep {_said(conn, proposal['keep_id'])}")
    verb = "expire" if proposal["kind"] == "expire" else "drop"
    return [*lines, f"{verb} {_said(conn, proposal['drop_id'])}"]
