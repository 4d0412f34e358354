-- m004_inbox_open: claiming the next update looked at every row ever received (finished ones
-- included, ~6 ms a claim at 50k rows, and growing), which throttled the webhook under load.
-- These partial indexes hold only the open rows, so a claim costs the same at any inbox size.
CREATE INDEX inbox_open ON inbox (bot_id, update_id) WHERE status IN ('pending', 'claimed');
CREATE INDEX inbox_open_chat ON inbox (bot_id, chat_key, update_id) WHERE status IN ('pending', 'claimed');
