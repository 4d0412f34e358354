-- m019_forget_holds: what /why's Forget deleted, held under the forget's audit id for a few
-- minutes so its Undo button can put it back (lib/memory/holds.py); the memory service deletes
-- each hold, with secure_delete, when its window closes.
CREATE TABLE forget_holds (
    audit_id INTEGER PRIMARY KEY,
    owner_user_id TEXT,
    held TEXT NOT NULL,
    purge_after REAL NOT NULL
);
CREATE INDEX forget_holds_purge ON forget_holds (purge_after);
