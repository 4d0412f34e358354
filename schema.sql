-- Ash's current schema: what `python migrate.py` produces on a blank database.
-- tests/test_migrate.py checks that the two agree. Timestamps are UTC ISO 8601 text
-- ("2026-11-22T08:09:10.123Z", sortable); leases are Unix seconds (REAL).
-- vec0 tables are not here: lib/memory creates them for the configured embedding model.

CREATE TABLE schema_migrations (
    name TEXT PRIMARY KEY,
    applied_at TEXT NOT NULL
);

-- Small key/value facts about this database (embedding model of the vector index, ...).
CREATE TABLE meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- A conversation: one per (provider, chat) at a time; /new closes it and opens another.
CREATE TABLE sessions (
    id INTEGER PRIMARY KEY,
    provider TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    chat_type TEXT NOT NULL DEFAULT 'private',
    user_id TEXT NOT NULL,
    title TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    closed_at TEXT,
    -- Compaction: a model-written summary of messages up to summary_through (inclusive).
    summary TEXT,
    summary_through INTEGER,
    metadata TEXT NOT NULL DEFAULT '{}'
);
CREATE UNIQUE INDEX sessions_open_chat ON sessions (provider, chat_id) WHERE closed_at IS NULL;
CREATE INDEX sessions_user ON sessions (user_id, updated_at);

-- Every user message and answer. owner_user_id is whose memory it is (lib/memory/scope.py):
-- the person in a private chat, "chat:<chat id>" in a group; retrieval only ever returns the
-- asking chat's own messages. speaker_user_id is who wrote a user message.
CREATE TABLE messages (
    id INTEGER PRIMARY KEY,
    session_id INTEGER NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    owner_user_id TEXT NOT NULL,
    role TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'system', 'tool')),
    content TEXT NOT NULL,
    token_count INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    update_id INTEGER,
    metadata TEXT NOT NULL DEFAULT '{}',
    speaker_user_id TEXT
);
CREATE INDEX messages_session ON messages (session_id, id);
CREATE INDEX messages_owner ON messages (owner_user_id, id);
CREATE INDEX messages_update ON messages (session_id, update_id) WHERE update_id IS NOT NULL;
CREATE INDEX messages_speaker ON messages (speaker_user_id) WHERE speaker_user_id IS NOT NULL;
-- The user turns that could be standing instructions (lib/memory/standing.py).
CREATE INDEX messages_standing ON messages (owner_user_id, id)
WHERE role = 'user' AND length(content) <= 500 AND (
    content LIKE 'always %' OR content LIKE 'never %' OR content LIKE 'please always %'
    OR content LIKE 'please never %' OR content LIKE 'please from now on%' OR content LIKE 'from now on%'
    OR content LIKE 'going forward%' OR content LIKE 'henceforth%' OR content LIKE 'in future%'
    OR content LIKE 'in the future%'
);

-- Knowledge: facts and notes, owned like messages. owner_user_id NULL with is_global = 1 is
-- visible to everyone.
CREATE TABLE memories (
    id INTEGER PRIMARY KEY,
    content TEXT NOT NULL,
    source TEXT NOT NULL DEFAULT 'user',
    owner_user_id TEXT,
    is_global INTEGER NOT NULL DEFAULT 0 CHECK (is_global IN (0, 1)),
    subject TEXT,
    confidence REAL NOT NULL DEFAULT 1.0,
    created_at TEXT NOT NULL,
    expires_at TEXT,
    superseded_by INTEGER REFERENCES memories (id) ON DELETE SET NULL,
    superseded_at TEXT,
    source_message_id INTEGER REFERENCES messages (id) ON DELETE SET NULL,
    metadata TEXT NOT NULL DEFAULT '{}',
    -- Times it was saved again (lib/memory/reinforce.py), and when it was last saved again or
    -- retrieved; an extracted fact that is neither decays until gc retires it (retired_at:
    -- kept, out of retrieval, restorable).
    reinforced_count INTEGER NOT NULL DEFAULT 0,
    last_reinforced_at TEXT,
    retired_at TEXT,
    -- Where it came from (m016: "user", "inference", "document:NAME", "web", "forward",
    -- "member:NAME", "tool:NAME", "mcp:NAME", "schedule", "admin", "cli") and whether it is in
    -- use: pending entries (written while a turn held outside content) wait for their owner and
    -- never reach a prompt; discarded ones were refused or expired unreviewed.
    origin TEXT NOT NULL DEFAULT 'user',
    status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'pending', 'discarded')),
    reviewed_at TEXT,
    CHECK (owner_user_id IS NOT NULL OR is_global = 1)
);
CREATE INDEX memories_owner ON memories (owner_user_id, created_at);
CREATE INDEX memories_expires ON memories (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX memories_status ON memories (status, created_at) WHERE status != 'active';

-- Consolidation's proposals (m017, m018; lib/memory/consolidate.py), waiting for review under
-- [memory] consolidate = "propose": 'merge' (a duplicate: `drop_id` is superseded by `keep_id`),
-- 'supersede' (a newer fact, `keep_id`, contradicts the older `drop_id`) and 'expire' (`drop_id`
-- is stale and is retired; no `keep_id`). Only a merge has a similarity. Ids only, never text.
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
CREATE INDEX memory_proposals_open ON memory_proposals (status, owner_user_id);
CREATE INDEX memory_proposals_drop ON memory_proposals (drop_id);
CREATE UNIQUE INDEX memory_proposals_expire ON memory_proposals (drop_id) WHERE kind = 'expire';

-- What /why's Forget deleted, held for its Undo button until purge_after (lib/memory/holds.py).
CREATE TABLE forget_holds (
    audit_id INTEGER PRIMARY KEY,
    owner_user_id TEXT,
    held TEXT NOT NULL,
    purge_after REAL NOT NULL
);
CREATE INDEX forget_holds_purge ON forget_holds (purge_after);

-- What retrieval ranks: chunks of messages and memories (long texts are split).
-- Rebuildable from messages and memories at any time.
CREATE TABLE search_chunks (
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL CHECK (kind IN ('message', 'memory')),
    ref_id INTEGER NOT NULL,
    ordinal INTEGER NOT NULL DEFAULT 0,
    owner_user_id TEXT,
    content TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    created_at TEXT NOT NULL,
    -- 1 once the chunk's vector is stored; new turns are embedded just after they are stored.
    embedded INTEGER NOT NULL DEFAULT 0,
    UNIQUE (kind, ref_id, ordinal)
);
CREATE INDEX search_chunks_owner ON search_chunks (owner_user_id, kind);
CREATE INDEX search_chunks_unembedded ON search_chunks (id) WHERE embedded = 0;

CREATE VIRTUAL TABLE search_fts USING fts5 (
    content,
    content = 'search_chunks',
    content_rowid = 'id',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER search_chunks_ai AFTER INSERT ON search_chunks BEGIN
    INSERT INTO search_fts (rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER search_chunks_ad AFTER DELETE ON search_chunks BEGIN
    INSERT INTO search_fts (search_fts, rowid, content) VALUES ('delete', old.id, old.content);
END;
CREATE TRIGGER search_chunks_au AFTER UPDATE OF content ON search_chunks BEGIN
    INSERT INTO search_fts (search_fts, rowid, content) VALUES ('delete', old.id, old.content);
    INSERT INTO search_fts (rowid, content) VALUES (new.id, new.content);
END;

-- Embeddings by content hash and model, so no text is embedded twice.
CREATE TABLE embedding_cache (
    content_hash TEXT NOT NULL,
    model TEXT NOT NULL,
    dimensions INTEGER NOT NULL,
    embedding BLOB NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (content_hash, model, dimensions)
) WITHOUT ROWID;

CREATE TABLE user_profiles (
    user_id TEXT PRIMARY KEY,
    username TEXT,
    display_name TEXT,
    notes TEXT NOT NULL DEFAULT '',
    preferences TEXT NOT NULL DEFAULT '{}',
    timezone TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

-- Users added with `ash users allow` and @username entries pinned at first contact.
CREATE TABLE allowed_users (
    entry TEXT PRIMARY KEY,
    user_id TEXT,
    source TEXT NOT NULL CHECK (source IN ('cli', 'config', 'admin')),
    added_at TEXT NOT NULL,
    pinned_at TEXT
);
CREATE INDEX allowed_users_user ON allowed_users (user_id);

-- Access taken away with `ash users deny` or the admin API: wins over config.toml's allowed_users,
-- lifted by allowing the person again; their data is kept.
CREATE TABLE denied_users (
    entry TEXT PRIMARY KEY,
    user_id TEXT,
    source TEXT NOT NULL CHECK (source IN ('cli', 'admin')),
    denied_at TEXT NOT NULL
);
CREATE INDEX denied_users_user ON denied_users (user_id) WHERE user_id IS NOT NULL;

-- Telegram chats Ash has seen: blocked chats are not written to again.
CREATE TABLE chats (
    chat_id TEXT PRIMARY KEY,
    type TEXT NOT NULL,
    title TEXT,
    blocked_at TEXT,
    migrated_to TEXT,
    denied_notice_at TEXT,
    updated_at TEXT NOT NULL
);
-- The denial cap counts the last minute's denials (lib/telegram/access.py).
CREATE INDEX chats_denied ON chats (denied_notice_at) WHERE denied_notice_at IS NOT NULL;

-- The model preset a chat picked with /model ([models.NAME]); no row means [default_llm].
CREATE TABLE chat_models (
    provider TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    preset TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (provider, chat_id)
) WITHOUT ROWID;

CREATE TABLE tool_executions (
    id INTEGER PRIMARY KEY,
    session_id INTEGER REFERENCES sessions (id) ON DELETE SET NULL,
    user_id TEXT,
    chat_id TEXT,
    tool_name TEXT NOT NULL,
    input TEXT NOT NULL,
    output TEXT,
    exit_code INTEGER,
    success INTEGER NOT NULL,
    duration_ms INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL
);
CREATE INDEX tool_executions_session ON tool_executions (session_id, created_at);

-- Telegram updates as received, keyed by (bot id, update_id): a repeat delivery is a no-op.
-- chat_key orders work: one chat's updates run one at a time in update_id order. Fired
-- scheduled tasks are queued here too (kind 'scheduled', see `follows`).
CREATE TABLE inbox (
    bot_id INTEGER NOT NULL,
    update_id INTEGER NOT NULL,
    chat_key TEXT,
    kind TEXT NOT NULL,
    payload BLOB NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'claimed', 'done', 'failed', 'skipped')),
    attempts INTEGER NOT NULL DEFAULT 0,
    claimed_by TEXT,
    lease_until REAL,
    not_before REAL,
    last_error TEXT,
    -- The Telegram message a turn started, stored before streaming so a resumed turn edits it.
    reply_chat_id TEXT,
    reply_message_id INTEGER,
    -- Every message of the answer, in order (JSON array); reply_message_id is the first.
    reply_message_ids TEXT NOT NULL DEFAULT '[]',
    received_at TEXT NOT NULL,
    done_at TEXT,
    -- Work Ash queued itself (a fired scheduled task, update_id < 0, a space Telegram never
    -- uses): the highest Telegram update_id stored when it was queued. It runs after those.
    follows INTEGER,
    -- The turn's whole answer ({"text", "markup"}), stored just before it is shown as final: a
    -- turn interrupted after that shows it again instead of asking the model again (m014).
    answer TEXT,
    PRIMARY KEY (bot_id, update_id)
);
CREATE INDEX inbox_work ON inbox (status, chat_key, update_id);
-- Only the open rows: claiming costs the same however many finished rows the inbox holds.
CREATE INDEX inbox_open ON inbox (bot_id, update_id) WHERE status IN ('pending', 'claimed');
-- A chat's open rows in the order they run: by coalesce(follows, update_id), then update_id
-- descending (a Telegram update before the work queued after it; queued work oldest first).
CREATE INDEX inbox_open_chat ON inbox (bot_id, chat_key, coalesce(follows, update_id))
    WHERE status IN ('pending', 'claimed');
CREATE INDEX inbox_done ON inbox (done_at) WHERE done_at IS NOT NULL;

CREATE TABLE usage (
    id INTEGER PRIMARY KEY,
    created_at TEXT NOT NULL,
    user_id TEXT,
    session_id INTEGER REFERENCES sessions (id) ON DELETE SET NULL,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    purpose TEXT NOT NULL DEFAULT 'chat',
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL NOT NULL DEFAULT 0
);
CREATE INDEX usage_user_day ON usage (user_id, created_at);

-- Who did what, never what was said (forgetting is recorded, its content is not).
CREATE TABLE audit_log (
    id INTEGER PRIMARY KEY,
    created_at TEXT NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT,
    detail TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_log_time ON audit_log (created_at);

-- Debounced fact extraction: one row per user with new messages not yet looked at.
CREATE TABLE extraction_queue (
    user_id TEXT PRIMARY KEY,
    due_at REAL NOT NULL,
    through_message_id INTEGER NOT NULL
);

-- Reminders and scheduled tasks (lib/schedule), fired through the inbox.
-- A task belongs to the person who made it (user_id) and writes to the chat, and forum topic,
-- it was made in. next_run_at is Unix seconds (REAL, like the inbox's leases); NULL once the
-- task is done or cancelled. The partial index holds only active tasks ordered by when they
-- are due, so finding the due ones costs the same however many tasks exist.
CREATE TABLE schedules (
    id INTEGER PRIMARY KEY,
    user_id TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    chat_type TEXT NOT NULL DEFAULT 'private',
    message_thread_id INTEGER,
    direct_messages_topic_id INTEGER,
    kind TEXT NOT NULL CHECK (kind IN ('once', 'interval', 'cron')),
    -- once: the time; interval: the first run (runs fall on starts_at + k * interval_seconds);
    -- cron: when it was made.
    starts_at REAL NOT NULL,
    interval_seconds INTEGER CHECK (interval_seconds IS NULL OR interval_seconds > 0),
    cron TEXT,
    timezone TEXT NOT NULL,
    action TEXT NOT NULL CHECK (action IN ('message', 'prompt')),
    text TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'done', 'cancelled')),
    next_run_at REAL,
    last_run_at REAL,
    run_count INTEGER NOT NULL DEFAULT 0,
    max_runs INTEGER CHECK (max_runs IS NULL OR max_runs > 0),
    ends_at REAL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    -- 'followup': made by Ash from the person's words about an event (m015); text is the event.
    purpose TEXT NOT NULL DEFAULT 'task' CHECK (purpose IN ('task', 'followup')),
    event_at REAL,
    CHECK ((kind = 'interval') = (interval_seconds IS NOT NULL)),
    CHECK ((kind = 'cron') = (cron IS NOT NULL))
);
CREATE INDEX schedules_due ON schedules (next_run_at) WHERE status = 'active';
CREATE INDEX schedules_chat ON schedules (chat_id, id) WHERE status = 'active';
CREATE INDEX schedules_user ON schedules (user_id, status);
CREATE INDEX schedules_followups ON schedules (user_id, chat_id) WHERE purpose = 'followup' AND status = 'active';

-- Follow-ups are opt-in per chat; `unanswered` silences a person after two unanswered (m015).
CREATE TABLE followup_chats (
    chat_id TEXT PRIMARY KEY,
    enabled INTEGER NOT NULL CHECK (enabled IN (0, 1)),
    changed_by TEXT NOT NULL,
    changed_at TEXT NOT NULL
);
CREATE TABLE followup_people (
    user_id TEXT PRIMARY KEY,
    unanswered INTEGER NOT NULL DEFAULT 0
);

-- One row per (task, scheduled time), written in the transaction that advances the task and
-- queues its work, so a time is fired once whatever runs concurrently. AUTOINCREMENT: a run's
-- id becomes its inbox row's update_id (negated), and must never be handed out twice.
CREATE TABLE schedule_runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    schedule_id INTEGER NOT NULL REFERENCES schedules (id) ON DELETE CASCADE,
    scheduled_for REAL NOT NULL,
    fired_at REAL NOT NULL,
    outcome TEXT NOT NULL CHECK (outcome IN ('queued', 'sent', 'skipped', 'missed', 'failed')),
    note TEXT,
    UNIQUE (schedule_id, scheduled_for)
);

-- Risky tool calls waiting for the person's Run / Deny (lib/agent/approval.py); a chat's
-- updates run one at a time, so the turn is parked here and resumed by the button press.
CREATE TABLE pending_actions (
    id INTEGER PRIMARY KEY,
    provider TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    -- Whose turn it is: only they may press Run.
    user_id TEXT NOT NULL,
    tool_name TEXT NOT NULL,
    tool_input TEXT NOT NULL,
    -- Why it waits: the outside content the turn holds, or "always".
    reason TEXT NOT NULL,
    -- The turn to resume (JSON: its input, system prompt, messages, steps so far).
    state TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'approved', 'denied', 'expired', 'superseded')),
    created_at TEXT NOT NULL,
    expires_at REAL NOT NULL,
    decided_at TEXT,
    decided_by TEXT,
    -- The message that shows the buttons, once sent (so they can be taken away).
    prompt_message_id INTEGER
);
CREATE INDEX pending_actions_open ON pending_actions (provider, chat_id, user_id) WHERE status = 'pending';
CREATE INDEX pending_actions_expiry ON pending_actions (expires_at) WHERE status = 'pending';

-- Tokens for Ash's MCP server (lib/mcp/tokens.py), stored only as the sha256 of their text.
-- Revoked tokens keep their row: a server that ever had a token answers 401 to a wrong one.
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

-- What each answer drew on (/why), corrections from /why, the web view's sign-ins
-- (lib/memory/provenance.py, lib/telegram/why.py, lib/web/ui/). Items hold ids and scores only;
-- a profile note line is named by the sha256 of its text, so forgetting leaves nothing here.
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

CREATE INDEX audit_log_target ON audit_log (target);
