-- m003_chunk_embedded: which chunks have their vector. Turns are stored with their full-text
-- index at once and embedded moments later, off the reply path; this finds the ones waiting.
-- Existing chunks count as waiting: filling them in is idempotent.
ALTER TABLE search_chunks ADD COLUMN embedded INTEGER NOT NULL DEFAULT 0;
CREATE INDEX search_chunks_unembedded ON search_chunks (id) WHERE embedded = 0;
-- A resumed turn looks up what an earlier run of its update stored.
CREATE INDEX messages_update ON messages (session_id, update_id) WHERE update_id IS NOT NULL;
