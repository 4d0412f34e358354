-- m016_memory_trust: where each knowledge entry came from, and whether it is in use.
-- origin: "user" (the person's own words), "inference" (Ash extracted it), "document:NAME",
-- "web", "forward", "member:NAME" (another group member), "tool:NAME", "mcp:NAME", "schedule",
-- "admin", "cli". status: "active" (used in prompts), "pending" (written while the turn held
-- outside content: waits for its owner to keep it, never reaches a prompt on its own),
-- "discarded" (its owner said no, or it waited longer than [memory] pending_days).
ALTER TABLE memories ADD COLUMN origin TEXT NOT NULL DEFAULT 'user';
ALTER TABLE memories ADD COLUMN status TEXT NOT NULL DEFAULT 'active'
    CHECK (status IN ('active', 'pending', 'discarded'));
ALTER TABLE memories ADD COLUMN reviewed_at TEXT;
CREATE INDEX memories_status ON memories (status, created_at) WHERE status != 'active';

-- The best origin the data allows for entries stored before this step: the source says most of
-- it; an MCP write names its token in the audit log's memory_add row.
UPDATE memories SET origin = CASE
    WHEN source = 'extraction' THEN 'inference'
    WHEN source = 'document' THEN 'document:' || coalesce(json_extract(metadata, '$.file'), 'a file')
    WHEN source = 'mcp' THEN coalesce(
        (SELECT a.actor FROM audit_log a
         WHERE a.action = 'memory_add' AND a.actor LIKE 'mcp:%'
           AND EXISTS (SELECT 1 FROM json_each(a.detail, '$.memory_ids') WHERE value = memories.id)
         ORDER BY a.id LIMIT 1),
        'mcp')
    WHEN source IN ('admin', 'cli') THEN source
    ELSE 'user'
END;
