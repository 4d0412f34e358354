-- m008_chat_models: the model preset each chat picked with /model (a [models.NAME] table of
-- config.toml). No row means [default_llm]; a row naming a preset the config no longer has
-- also means [default_llm] (lib/agent/presets.py), and is kept in case the preset returns.
CREATE TABLE chat_models (
    provider TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    preset TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (provider, chat_id)
) WITHOUT ROWID;
