-- m007_denied_users: access taken away (`ash users deny`, DELETE /admin/users/{id}/access).
-- A denial wins over config.toml's allowed_users and is lifted by allowing the person again;
-- what Ash holds about them is kept. `entry` is a numeric id or an @username, like allowed_users.
CREATE TABLE denied_users (
    entry TEXT PRIMARY KEY,
    user_id TEXT,
    source TEXT NOT NULL CHECK (source IN ('cli', 'admin')),
    denied_at TEXT NOT NULL
);
CREATE INDEX denied_users_user ON denied_users (user_id) WHERE user_id IS NOT NULL;
