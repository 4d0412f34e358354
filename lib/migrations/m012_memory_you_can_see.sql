-- m012_memory_you_can_see: what each answer drew on (/why), corrections asked for from /why,
-- the web view's sign-ins, and an index so a memory's audit history is quick to read.
--
-- One row per prompt: who asked, whose memory it read, and where the answer went. Items hold
-- ids and scores only; a profile note line is named by the sha256 of its text, never the text,
-- so forgetting a memory or a note leaves nothing of it here.
CREATE TABLE answer_sources (
    id INTEGER PRIMARY KEY,
    provider TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    memory_owner TEXT NOT NULL,
    session_id INTEGER,
    update_id INTEGER,
    -- messages.id of the stored answer, once it is stored.
    answer_message_id INTEGER,
    -- The channel's ids of the messages that show the answer (Telegram message ids, JSON).
    reply_message_ids TEXT NOT NULL DEFAULT '[]',
    created_at TEXT NOT NULL
);
-- A turn resumed after a crash prepares its prompt again: one row per update, replaced.
CREATE UNIQUE INDEX answer_sources_update ON answer_sources (provider, chat_id, update_id)
    WHERE update_id IS NOT NULL;
CREATE INDEX answer_sources_chat ON answer_sources (provider, chat_id, user_id, id);
CREATE TABLE answer_source_items (
    id INTEGER PRIMARY KEY,
    answer_id INTEGER NOT NULL REFERENCES answer_sources (id) ON DELETE CASCADE,
    kind TEXT NOT NULL CHECK (kind IN ('knowledge', 'message', 'note')),
    -- memories.id or messages.id; NULL for a note line.
    ref_id INTEGER,
    note_hash TEXT,
    score REAL,
    rank INTEGER NOT NULL
);
CREATE INDEX answer_source_items_answer ON answer_source_items (answer_id);

-- "Wrong" under /why: the next message of that person in that chat is the correction.
CREATE TABLE memory_corrections (
    id INTEGER PRIMARY KEY,
    provider TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    item_id INTEGER NOT NULL REFERENCES answer_source_items (id) ON DELETE CASCADE,
    prompt_message_id INTEGER,
    created_at TEXT NOT NULL,
    expires_at REAL NOT NULL,
    status TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'done', 'dropped'))
);
CREATE INDEX memory_corrections_open ON memory_corrections (provider, chat_id, user_id) WHERE status = 'open';

-- Web view sessions (/admin/ui): only the sha256 of the cookie's random id is stored, with the
-- fingerprint of the admin token it was opened with (another token revokes it).
CREATE TABLE ui_sessions (
    id INTEGER PRIMARY KEY,
    session_hash TEXT NOT NULL UNIQUE,
    token_fingerprint TEXT NOT NULL,
    created_at TEXT NOT NULL,
    expires_at REAL NOT NULL,
    revoked_at TEXT,
    last_seen_at TEXT
);
-- Failed sign-ins, by client address, for the rate limit (pruned as they age).
CREATE TABLE ui_signin_failures (
    id INTEGER PRIMARY KEY,
    client TEXT NOT NULL,
    at REAL NOT NULL
);
CREATE INDEX ui_signin_failures_at ON ui_signin_failures (at);

CREATE INDEX audit_log_target ON audit_log (target);

-- Entry ids are never handed out twice (lib/memory/knowledge.py next_id): the audit log names
-- entries by id. Ids of entries forgotten before this version are in the log already.
INSERT INTO meta (key, value)
SELECT 'memories.high_water', CAST(max(ids.value) AS TEXT)
FROM audit_log, json_each(audit_log.detail, '$.memory_ids') AS ids
WHERE ids.type = 'integer'
HAVING max(ids.value) IS NOT NULL
ON CONFLICT (key) DO NOTHING;
