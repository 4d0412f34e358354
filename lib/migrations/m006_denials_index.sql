-- m006_denials_index: the cap on denials counts those of the last minute; without an index that
-- count reads every stranger's row ever denied, so a long flood would slow each next message.
CREATE INDEX chats_denied ON chats (denied_notice_at) WHERE denied_notice_at IS NOT NULL;
