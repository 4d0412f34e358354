"""The tables of config.toml, as typed structs: every key Ash reads, its type, its range, its
default and its description (config.example.toml shows them in use; docs/reference/configuration.md
is generated from these). The tables of tools and senses are in tool_sections.py."""

from __future__ import annotations

import re
from typing import Annotated, Literal

import msgspec

from lib.config.tool_sections import (
    BraveSearchConfig,
    DocumentsConfig,
    FollowupsConfig,
    McpConfig,
    ReplicaConfig,
    SandboxConfig,
    SchedulerConfig,
    TranscriptionConfig,
    WebFetchConfig,
)
from lib.config.values import Count, Fraction, NonNegative, NonNegativeInt, Port, Positive, Table, Temperature, about


class ServerConfig(Table):
    """The HTTP server (`ash serve`)."""

    host: Annotated[str, about("Address to listen on; the container passes --host 0.0.0.0.")] = "127.0.0.1"
    port: Annotated[Port, about("Port to listen on; PORT in the environment wins.")] = 8080
    # Telegram updates are small; anything larger is refused with 413.
    max_body_bytes: Annotated[Count, about("Largest request body accepted; a larger webhook body gets 413.")] = (
        1_048_576
    )
    tick_interval: Annotated[Positive, about("Seconds between background sweeps for pending or stale work.")] = 15.0
    # Telegram's updates arrive at once; 10 s carries the largest body allowed (max_body_bytes)
    # over a link of about 1 Mbit/s, and bounds how long a trickling client holds one of the
    # server's connections.
    body_timeout: Annotated[
        Positive,
        about(
            "Seconds a client may take to send a request's headers, and again its body (any route); "
            "then the connection is closed (a body: 408 first)."
        ),
    ] = 10.0
    # Each idle or slow connection costs about 18 KB; strangers' uploads hold at most 16 of them
    # (lib/web/door.py).
    max_connections: Annotated[
        int,
        msgspec.Meta(ge=64),
        about(
            "Connections served at once (granian's backpressure); more wait in the listen queue. "
            "`ash serve` raises its open-file limit to fit."
        ),
    ] = 4096


class TelegramConfig(Table):
    """Who may talk to Ash, and how it talks to Telegram."""

    allowed_users: Annotated[
        list[str | int],
        about(
            'Who may talk to Ash: numeric Telegram ids, or "@username" entries pinned to the id of their '
            "first contact. Empty: nobody but the owner (add people with `ash users allow`)."
        ),
    ] = msgspec.field(default_factory=list)
    stream_edit_interval: Annotated[Positive, about("Seconds between streaming edits in private chats.")] = 1.0
    group_stream_edit_interval: Annotated[
        Positive, about("Seconds between streaming edits in groups (Telegram allows about 20 messages a minute).")
    ] = 3.0
    max_concurrent_chats: Annotated[Count, about("Chats answered in parallel.")] = 8
    lease_seconds: Annotated[
        Positive, about("Seconds after which a claimed update that was not renewed is taken over.")
    ] = 90.0
    max_attempts: Annotated[Count, about("Tries of one update; then it is given up and the person told.")] = 5
    inbox_retention_days: Annotated[Count, about("Days after which handled updates are pruned.")] = 7
    photo_max_bytes: Annotated[
        Count, about("Bytes: the largest size of a photo within this is downloaded for the model to see.")
    ] = 10_000_000
    # In a group the /why list would be sent privately anyway.
    memory_button: Annotated[
        Literal["private", "always", "never"],
        about("Where the 🧠 N button under an answer that drew on memory (it opens /why) is shown."),
    ] = "private"


class LLMConfig(Table):
    """A language model: [default_llm], [fallback_llm]."""

    provider: Annotated[
        Literal["anthropic", "openai"],
        about('Who serves the model; "openai" includes any OpenAI-compatible server (OPENAI_BASE_URL).'),
    ] = "anthropic"
    model: Annotated[str, about("The model's name as its provider knows it.")] = "claude-sonnet-4-6"
    temperature: Annotated[Temperature, about("Sampling temperature: 0 to 2 for OpenAI, 0 to 1 for Anthropic.")] = 0.7
    max_tokens: Annotated[Count, about("Most tokens one answer may have.")] = 4096


class ModelPreset(LLMConfig):
    """A `[models.NAME]` table: a model a chat may pick with /model. Provider and model are
    required; the other keys default as in [default_llm]."""

    provider: Annotated[
        Literal["anthropic", "openai"],
        about('Who serves the model; "openai" includes any OpenAI-compatible server (OPENAI_BASE_URL).'),
    ]
    model: Annotated[str, about("The model's name as its provider knows it.")]


# Preset names are typed after /model and carried in a button's callback data (64 bytes at most).
PRESET_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,31}")
# /model's word for [default_llm], so no preset may take it.
DEFAULT_PRESET = "default"

# What answers when the default model fails and the file has no [fallback_llm]: used only while
# OPENAI_API_KEY is set (lib/llm/router.py), so a local server is never asked for gpt-4o.
IMPLICIT_FALLBACK = LLMConfig(provider="openai", model="gpt-4o")


class AgentConfig(Table):
    """One turn of the model."""

    max_steps: Annotated[Count, about("Model calls per turn before Ash stops and says so.")] = 10
    daily_token_budget: Annotated[
        NonNegativeInt, about("Tokens (input + output) one person may spend per day; 0 means no limit.")
    ] = 0
    llm_retries: Annotated[
        NonNegativeInt, about("Retries of a retryable provider error before the fallback model answers.")
    ] = 2


class PriceConfig(Table):
    """US dollars per million tokens."""

    input: Annotated[NonNegative, about("US dollars per million input tokens.")] = 0.0
    output: Annotated[NonNegative, about("US dollars per million output tokens.")] = 0.0


def default_prices() -> dict[str, PriceConfig]:
    """The built-in prices; [prices] in the file adds to them or overrides them."""
    return {
        "claude-sonnet-4-6": PriceConfig(input=3.0, output=15.0),
        "claude-haiku-4-5": PriceConfig(input=1.0, output=5.0),
        "gpt-4o": PriceConfig(input=2.5, output=10.0),
        "gpt-4o-mini": PriceConfig(input=0.15, output=0.6),
        "gpt-4.1-mini": PriceConfig(input=0.4, output=1.6),
    }


class MemoryConfig(Table):
    """The database, the prompt's budget, compaction, fact extraction and garbage collection."""

    database_path: Annotated[str | None, about("The SQLite database; unset: $ASH_HOME/ash.db.")] = None
    max_context_messages: Annotated[Count, about("Most recent messages of the session considered for the prompt.")] = 20
    context_token_budget: Annotated[Count, about("Tokens the whole prompt may hold.")] = 100_000
    recency_window: Annotated[Count, about("The last N messages are always in the prompt.")] = 10
    system_prompt_buffer: Annotated[NonNegativeInt, about("Tokens reserved for the system prompt.")] = 8000
    retrieval_token_budget: Annotated[NonNegativeInt, about("Tokens of retrieved memory injected into one prompt.")] = (
        2000
    )
    auto_gc: Annotated[bool, about("Garbage-collect expired entries at start-up.")] = True
    max_entries: Annotated[Count | None, about("Most active memories one person may have; unset: no cap.")] = None
    compaction_enabled: Annotated[
        bool, about("Summarise old history when a session outgrows its budget (never silently dropped).")
    ] = True
    compaction_reserve_tokens: Annotated[
        NonNegativeInt, about("Tokens kept free for the answer when deciding to compact.")
    ] = 16384
    compaction_keep_recent_tokens: Annotated[
        NonNegativeInt, about("Tokens of the newest messages that compaction leaves as they are.")
    ] = 20000
    compaction_summary_max_tokens: Annotated[Count, about("Most tokens one compaction summary may have.")] = 2000
    extraction_enabled: Annotated[
        bool, about("Extract facts about the person from conversations into their profile and knowledge.")
    ] = True
    extraction_model: Annotated[str | None, about("The model that extracts facts; unset: the default_llm model.")] = (
        None
    )
    extraction_min_message_length: Annotated[
        NonNegativeInt, about("Messages shorter than this many characters are not mined for facts.")
    ] = 20
    extraction_debounce_seconds: Annotated[
        NonNegative, about("Seconds of quiet in a chat before its new messages are mined for facts.")
    ] = 30.0
    extraction_confidence_threshold: Annotated[
        Fraction, about("Extracted facts below this confidence are not saved.")
    ] = 0.7
    # Seed 001: +0.1 x (1 - c).
    reinforcement_rate: Annotated[
        Fraction,
        about(
            "Saving a fact that is already there raises its confidence by this share of what is left "
            "to 1, instead of storing a copy."
        ),
    ] = 0.1
    decay_per_week: Annotated[
        Fraction,
        about(
            "Confidence an extracted fact loses per week in which it is neither saved again nor retrieved "
            "(never what someone asked Ash to remember)."
        ),
    ] = 0.05
    retire_below: Annotated[
        Fraction, about("`ash memory gc` retires an extracted fact whose confidence fell below this (kept, audited).")
    ] = 0.1
    pending_days: Annotated[
        Count,
        about(
            "Days a memory written while a turn held outside content waits for its owner to keep it "
            "(/memory pending, `ash memory pending`) before it is discarded unreviewed."
        ),
    ] = 14
    consolidate: Annotated[
        Literal["off", "propose", "auto"],
        about(
            "Once a day, duplicate facts (the same words, or nearly) are found, then the model looks for "
            'contradicted and stale ones: "propose" changes nothing until reviewed (`ash memory review`, '
            '/memory pending); "auto" applies at once (audited, undoable); "off" does neither.'
        ),
    ] = "propose"
    consolidate_daily_tokens: Annotated[
        NonNegativeInt,
        about(
            "Tokens consolidation may spend with the extraction model in one UTC day to find contradicted "
            "and stale facts (recorded in usage with the purpose consolidation); 0: duplicate checks only."
        ),
    ] = 20000


class EmbeddingsConfig(Table):
    """The vectors behind retrieval by meaning."""

    provider: Annotated[
        Literal["local", "openai", "none"],
        about('"local": offline, nothing leaves the machine; "openai"; "none": words only (FTS5).'),
    ] = "local"
    model: Annotated[
        str,
        about(
            'local: "multilingual-e5-small" or "all-MiniLM-L6-v2"; openai: e.g. "text-embedding-3-small". '
            "Run `ash memory reindex` after a change."
        ),
    ] = "multilingual-e5-small"
    dimensions: Annotated[Count, about("The vectors' size (384 for the local models, 1536 for OpenAI's small).")] = 384


class Config(Table):
    """The whole file."""

    owner: Annotated[
        int | None,
        about(
            "Your numeric Telegram id: USER.md reaches the model only when you ask, and CLI commands with "
            "--user default to you."
        ),
    ] = None
    timezone: Annotated[
        str, about("IANA time zone for dates in prompts and reminders; a person's own time zone wins.")
    ] = "UTC"
    workspace: Annotated[
        str | None, about("Folder with SOUL.md, USER.md and TOOLS.md; unset: the bundled workspace/.")
    ] = None
    server: ServerConfig = msgspec.field(default_factory=ServerConfig)
    telegram: TelegramConfig = msgspec.field(default_factory=TelegramConfig)
    default_llm: Annotated[LLMConfig, about("The model that answers.")] = msgspec.field(default_factory=LLMConfig)
    # None: the file has no [fallback_llm] (IMPLICIT_FALLBACK may answer, see there).
    fallback_llm: Annotated[
        LLMConfig | None,
        about(
            "Answers when the default model keeps failing. Without this table, OpenAI's gpt-4o answers only "
            "while OPENAI_API_KEY is set (a local server is never asked for gpt-4o)."
        ),
    ] = None
    models: Annotated[
        dict[str, ModelPreset], about("Models a chat may switch to with /model, by name ([models.NAME]).")
    ] = msgspec.field(default_factory=dict)
    agent: AgentConfig = msgspec.field(default_factory=AgentConfig)
    prices: Annotated[
        dict[str, PriceConfig], about("Prices by model name, for `ash usage`; these add to the built-in ones.")
    ] = msgspec.field(default_factory=default_prices)
    memory: MemoryConfig = msgspec.field(default_factory=MemoryConfig)
    embeddings: EmbeddingsConfig = msgspec.field(default_factory=EmbeddingsConfig)
    sandbox: SandboxConfig = msgspec.field(default_factory=SandboxConfig)
    brave_search: BraveSearchConfig = msgspec.field(default_factory=BraveSearchConfig)
    scheduler: SchedulerConfig = msgspec.field(default_factory=SchedulerConfig)
    followups: FollowupsConfig = msgspec.field(default_factory=FollowupsConfig)
    transcription: TranscriptionConfig = msgspec.field(default_factory=TranscriptionConfig)
    documents: DocumentsConfig = msgspec.field(default_factory=DocumentsConfig)
    web_fetch: WebFetchConfig = msgspec.field(default_factory=WebFetchConfig)
    mcp: McpConfig = msgspec.field(default_factory=McpConfig)
    replica: ReplicaConfig = msgspec.field(default_factory=ReplicaConfig)
