-- m020_standing_instructions: a person's standing instructions ("Always confirm dates when I ask
-- about meetings") reach every prompt of theirs (lib/memory/standing.py). The index holds only
-- the user turns that could be one, so finding them does not read a person's 100k messages.
-- Its WHERE clause is repeated word for word in standing.py's query (SQLite uses a partial index
-- only for a query that states its terms).
CREATE INDEX messages_standing ON messages (owner_user_id, id)
WHERE role = 'user' AND length(content) <= 500 AND (
    content LIKE 'always %' OR content LIKE 'never %' OR content LIKE 'please always %'
    OR content LIKE 'please never %' OR content LIKE 'please from now on%' OR content LIKE 'from now on%'
    OR content LIKE 'going forward%' OR content LIKE 'henceforth%' OR content LIKE 'in future%'
    OR content LIKE 'in the future%'
);
