-- m017_memory_proposals: what consolidation (lib/memory/consolidate.py) proposes to change in
-- memory, waiting for review under [memory] consolidate = "propose": merge `drop_id` into
-- `keep_id` (the duplicate is superseded by the entry kept). Ids only, never text; a proposal
-- goes with either entry when it is forgotten.
CREATE TABLE memory_proposals (
    id INTEGER PRIMARY KEY,
    owner_user_id TEXT,
    kind TEXT NOT NULL CHECK (kind IN ('merge')),
    keep_id INTEGER NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    drop_id INTEGER NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    similarity REAL NOT NULL,
    status TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'applied', 'skipped')),
    created_at TEXT NOT NULL,
    decided_at TEXT,
    UNIQUE (keep_id, drop_id)
);
CREATE INDEX memory_proposals_open ON memory_proposals (status, owner_user_id);
CREATE INDEX memory_proposals_drop ON memory_proposals (drop_id);
