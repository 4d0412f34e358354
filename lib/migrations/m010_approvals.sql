-- m010_approvals: risky tool calls waiting for the person's Run / Deny
-- (lib/agent/approval.py). A turn whose context holds outside content stops before such a call;
-- what it needs to go on is kept here, and the button press resumes it. A chat's updates run one
-- at a time, so the turn cannot wait in place. Kept after the decision as the record of it.
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
