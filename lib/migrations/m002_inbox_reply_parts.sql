-- m002_inbox_reply_parts: every Telegram message a turn has sent, not only the first, so a turn
-- resumed after a crash edits all of them instead of sending the later parts again.
ALTER TABLE inbox ADD COLUMN reply_message_ids TEXT NOT NULL DEFAULT '[]';
UPDATE inbox SET reply_message_ids = json_array(reply_message_id) WHERE reply_message_id IS NOT NULL;
