-- m015_followups: Ash follows up (lib/schedule/followups.py). A follow-up is a scheduled task
-- (purpose 'followup', once) made from the person's own words about an event: `text` holds the
-- event ("job interview"), `event_at` when it happens, and next_run_at when Ash checks in. It
-- fires through the inbox like any task, so it is sent exactly once.
ALTER TABLE schedules ADD COLUMN purpose TEXT NOT NULL DEFAULT 'task' CHECK (purpose IN ('task', 'followup'));
ALTER TABLE schedules ADD COLUMN event_at REAL;
CREATE INDEX schedules_followups ON schedules (user_id, chat_id) WHERE purpose = 'followup' AND status = 'active';

-- Opt-in, per chat (off by default): a private chat's row is its person's choice; a group's is
-- the owner's. `unanswered` counts the follow-ups sent to a person since they last wrote: at two,
-- no more are sent until they write again.
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
