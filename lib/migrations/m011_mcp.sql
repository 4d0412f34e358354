-- m011_mcp: tokens for Ash's MCP server, and reinforcement, decay and retirement of memories.
--
-- A token is stored only as the sha256 of its text: the text is shown once, when it is made.
-- Revoked tokens keep their row, so a server that ever had a token answers 401 (not 403) to a
-- wrong one, and `ash mcp token list` still shows what was revoked and when.
CREATE TABLE mcp_tokens (
    id INTEGER PRIMARY KEY,
    user_id TEXT NOT NULL,
    name TEXT NOT NULL,
    token_hash TEXT NOT NULL UNIQUE,
    read_only INTEGER NOT NULL DEFAULT 0 CHECK (read_only IN (0, 1)),
    created_at TEXT NOT NULL,
    expires_at TEXT,
    revoked_at TEXT,
    last_used_at TEXT
);
CREATE INDEX mcp_tokens_user ON mcp_tokens (user_id);

-- Saving a fact again reinforces it (lib/memory/reinforce.py); a fact Ash extracted by itself
-- that is never reinforced nor retrieved decays until gc retires it: kept, out of retrieval,
-- and restorable (`ash memory restore ID`).
ALTER TABLE memories ADD COLUMN reinforced_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE memories ADD COLUMN last_reinforced_at TEXT;
ALTER TABLE memories ADD COLUMN retired_at TEXT;
