-- m005_group_privacy: a group's messages belonged to whoever happened to ask, so one member's
-- turn in a group could retrieve another's private chat, and a private chat could retrieve the
-- group. Now every chat is its own memory (lib/memory/scope.py): a group's messages, and the
-- knowledge that came from them, belong to "chat:<chat id>"; speaker_user_id keeps who said
-- each user message, so forgetting a person also finds their words in groups.
ALTER TABLE messages ADD COLUMN speaker_user_id TEXT;
UPDATE messages SET speaker_user_id = owner_user_id WHERE role = 'user';
CREATE INDEX messages_speaker ON messages (speaker_user_id) WHERE speaker_user_id IS NOT NULL;

UPDATE messages
SET owner_user_id = 'chat:' || (SELECT s.chat_id FROM sessions s WHERE s.id = messages.session_id)
WHERE session_id IN (SELECT id FROM sessions WHERE chat_type IN ('group', 'supergroup', 'channel'));

-- Knowledge extracted from (or saved beside) a group message belongs to that group.
UPDATE memories
SET owner_user_id = (SELECT m.owner_user_id FROM messages m WHERE m.id = memories.source_message_id)
WHERE is_global = 0
  AND source_message_id IN (SELECT id FROM messages WHERE owner_user_id LIKE 'chat:%');

-- Index rows follow their rows' new owners; their vectors are rewritten into the right
-- partition by the next embedding pass (embedded = 0), and retrieval checks the canonical
-- owner meanwhile.
UPDATE search_chunks
SET owner_user_id = (SELECT m.owner_user_id FROM messages m WHERE m.id = search_chunks.ref_id), embedded = 0
WHERE kind = 'message'
  AND ref_id IN (SELECT id FROM messages WHERE owner_user_id LIKE 'chat:%');
UPDATE search_chunks
SET owner_user_id = (SELECT m.owner_user_id FROM memories m WHERE m.id = search_chunks.ref_id), embedded = 0
WHERE kind = 'memory' AND owner_user_id IS NOT NULL
  AND ref_id IN (SELECT id FROM memories WHERE owner_user_id LIKE 'chat:%');
