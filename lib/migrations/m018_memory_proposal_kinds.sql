-- m018_memory_proposal_kinds: consolidation's model pass (lib/memory/consolidate_model.py) proposes
-- two more changes beside a merge: 'supersede' (a newer fact contradicts an older one: `keep_id`
-- replaces `drop_id`) and 'expire' (`drop_id` is stale: retired, no `keep_id`). Only a merge has
-- a similarity. Still ids only, never text: the kind says why. SQLite cannot alter a CHECK, so
-- the table is rebuilt with its rows (nothing references it).
ALTER TABLE memory_proposals RENAME TO memory_proposals_m017;
CREATE TABLE memory_proposals (
    id INTEGER PRIMARY KEY,
    owner_user_id TEXT,
    kind TEXT NOT NULL CHECK (kind IN ('merge', 'supersede', 'expire')),
    keep_id INTEGER REFERENCES memories (id) ON DELETE CASCADE,
    drop_id INTEGER NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    similarity REAL,
    status TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'applied', 'skipped')),
    created_at TEXT NOT NULL,
    decided_at TEXT,
    CHECK ((keep_id IS NULL) = (kind = 'expire')),
    CHECK ((similarity IS NOT NULL) = (kind = 'merge')),
    UNIQUE (kind, keep_id, drop_id)
);
INSERT INTO memory_proposals (id, owner_user_id, kind, keep_id, drop_id, similarity, status, created_at, decided_at)
SELECT id, owner_user_id, kind, keep_id, drop_id, similarity, status, created_at, decided_at
FROM memory_proposals_m017;
DROP TABLE memory_proposals_m017;
CREATE INDEX memory_proposals_open ON memory_proposals (status, owner_user_id);
CREATE INDEX memory_proposals_drop ON memory_proposals (drop_id);
-- UNIQUE treats NULLs as distinct, so an expiry (no keep_id) is made unique by the entry it retires.
CREATE UNIQUE INDEX memory_proposals_expire ON memory_proposals (drop_id) WHERE kind = 'expire';
