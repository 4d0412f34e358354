"""Consolidation: duplicate facts found and merged, after review by default.

Once a day (the memory service) each owner's active facts are compared with deterministic checks,
before any model would be asked: the same words (reinforce.fingerprint) or nearly the same
(Jaccard similarity of the word sets of at least NEAR). A pair becomes a proposal to merge: the
entry with more confidence (then the older one) is kept and the other superseded by it, so
retrieval shows the fact once. `[memory] consolidate`: "propose" (the default) stores the
proposal and changes nothing until it is applied (`ash memory review`); "auto" applies it at
once; "off" does nothing. Applying is an audited supersession (`memory_supersede` by
`consolidate`, with the proposal's id), which `ash memory undo` can take back.

Not built yet: contradicted and stale facts (they need the model, and a daily token cap).
"""

from __future__ import annotations

from itertools import combinations

import apsw

from lib.config import Settings
from lib.db import immediate, now_iso, one, rows
from lib.memory import knowledge, reinforce

ACTOR = "consolidate"
NEAR = 0.7
# Facts compared per owner in one pass (pairs grow with the square).
MAX_FACTS = 2000
FACTS_SQL = f"""
SELECT id, owner_user_id, is_global, content, confidence, created_at FROM memories
WHERE source != 'document' AND {knowledge.ACTIVE_SQL}
ORDER BY owner_user_id, id
"""
PROPOSE_SQL = """
INSERT OR IGNORE INTO memory_proposals (owner_user_id, kind, keep_id, drop_id, similarity, created_at)
VALUES (:owner, 'merge', :keep, :drop, :similarity, :now)
"""
OPEN_SQL = """
SELECT id, owner_user_id, kind, keep_id, drop_id, similarity, status, created_at FROM memory_proposals
WHERE status = 'open' AND (:owner IS NULL OR owner_user_id = :owner) ORDER BY id
"""
DECIDE_SQL = "UPDATE memory_proposals SET status = :to, decided_at = :now WHERE id = :id AND status = 'open'"


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


def propose(conn: apsw.Connection, settings: Settings) -> dict:
    """Find duplicate facts and store proposals (applied at once under "auto"); returns counts."""
    mode = settings.config.memory.consolidate
    if mode == "off":
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
                conn.execute(
                    PROPOSE_SQL,
                    {"owner": who, "keep": keep["id"], "drop": drop["id"], "similarity": score, "now": now_iso()},
                )
                if not conn.changes():
                    continue  # proposed before (and perhaps skipped): not again
                proposed += 1
                dropped.add(drop["id"])
                if mode == "auto":
                    applied += apply(conn, settings, conn.last_insert_rowid(), actor=ACTOR) is None
    return {"proposed": proposed, "applied": applied}


def open_proposals(conn: apsw.Connection, owner: str | None = None) -> list[dict]:
    """Proposals waiting for review, oldest first."""
    return rows(conn, OPEN_SQL, {"owner": owner})


def apply(conn: apsw.Connection, settings: Settings, proposal_id: int, *, actor: str) -> str | None:
    """Merge: supersede the duplicate by the entry kept. None when done, else why not."""
    with immediate(conn):
        found = one(conn, "SELECT keep_id, drop_id, status FROM memory_proposals WHERE id = ?", (proposal_id,))
        if found is None or found["status"] != "open":
            return f"proposal #{proposal_id} is not open"
        keep, drop = knowledge.get(conn, found["keep_id"]), knowledge.get(conn, found["drop_id"])
        if keep is None or drop is None or not keep.active or not drop.active:
            conn.execute(DECIDE_SQL, {"id": proposal_id, "to": "skipped", "now": now_iso()})
            return f"proposal #{proposal_id}: an entry changed since; skipped"
        knowledge.supersede(conn, drop.id, keep.id, actor=actor, proposal=proposal_id, reason="duplicate")
        conn.execute(DECIDE_SQL, {"id": proposal_id, "to": "applied", "now": now_iso()})
    return None


def skip(conn: apsw.Connection, proposal_id: int) -> bool:
    """Leave both entries as they are; the pair is not proposed again."""
    with immediate(conn):
        conn.execute(DECIDE_SQL, {"id": proposal_id, "to": "skipped", "now": now_iso()})
        return bool(conn.changes())
