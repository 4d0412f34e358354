-- m009_schedules: reminders and scheduled tasks (lib/schedule), fired through the inbox.
--
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
    CHECK ((kind = 'interval') = (interval_seconds IS NOT NULL)),
    CHECK ((kind = 'cron') = (cron IS NOT NULL))
);
CREATE INDEX schedules_due ON schedules (next_run_at) WHERE status = 'active';
CREATE INDEX schedules_chat ON schedules (chat_id, id) WHERE status = 'active';
CREATE INDEX schedules_user ON schedules (user_id, status);

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

-- Work Ash queues itself (a fired task) has a negative update_id, a space Telegram never uses,
-- and `follows`: the highest Telegram update_id stored when it was queued. A chat's open rows
-- run in the order (coalesce(follows, update_id), then update_id descending), so queued work
-- comes after everything its chat had received and before whatever arrives next.
ALTER TABLE inbox ADD COLUMN follows INTEGER;
DROP INDEX inbox_open_chat;
CREATE INDEX inbox_open_chat ON inbox (bot_id, chat_key, coalesce(follows, update_id))
    WHERE status IN ('pending', 'claimed');
