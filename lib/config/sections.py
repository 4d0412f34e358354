"""The tables of config.toml, as typed structs: every key Ash reads, its type, its range and its
default (config.example.toml documents them). Unknown keys fail loudly (typos)."""

from __future__ import annotations

import re
from typing import Annotated, Literal

import msgspec

# Ranges msgspec checks while decoding the file, so an error names the key and the range.
Positive = Annotated[float, msgspec.Meta(gt=0)]
Count = Annotated[int, msgspec.Meta(ge=1)]
NonNegativeInt = Annotated[int, msgspec.Meta(ge=0)]
NonNegative = Annotated[float, msgspec.Meta(ge=0)]
Fraction = Annotated[float, msgspec.Meta(ge=0, le=1)]
Port = Annotated[int, msgspec.Meta(ge=1, le=65535)]
# OpenAI accepts 0 to 2; Anthropic 0 to 1 (checked in _check_values).
Temperature = Annotated[float, msgspec.Meta(ge=0, le=2)]
# Brave Search returns at most 20 results a request.
BraveCount = Annotated[int, msgspec.Meta(ge=1, le=20)]


class _Section(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A config table: unknown keys are typos and fail loudly."""


class ServerConfig(_Section):
    host: str = "127.0.0.1"
    port: Port = 8080
    # Telegram updates are small; anything larger is refused with 413.
    max_body_bytes: Count = 1_048_576
    # Seconds between background sweeps for pending or stale work.
    tick_interval: Positive = 15.0
    # Seconds a client may take to send a request's headers, and again its body (any route);
    # then the connection is closed (a body: 408 first). Telegram's updates arrive at once; 10 s
    # carries the largest body allowed (max_body_bytes) over a link of about 1 Mbit/s, and
    # bounds how long a trickling client holds one of the server's connections.
    body_timeout: Positive = 10.0
    # Connections served at once (granian's backpressure); more wait in the listen queue. Each
    # idle or slow one costs about 18 KB; strangers' uploads hold at most 16 of them (lib/web/door.py).
    max_connections: Annotated[int, msgspec.Meta(ge=64)] = 4096


class TelegramConfig(_Section):
    allowed_users: list[str | int] = msgspec.field(default_factory=list)
    # Seconds between streaming edits in private chats; groups use group_stream_edit_interval.
    stream_edit_interval: Positive = 1.0
    group_stream_edit_interval: Positive = 3.0
    max_concurrent_chats: Count = 8
    lease_seconds: Positive = 90.0
    max_attempts: Count = 5
    inbox_retention_days: Count = 7
    photo_max_bytes: Count = 10_000_000
    # The 🧠 N button under an answer that drew on memory (it opens the /why list): in private
    # chats only by default; in a group the list would be sent privately anyway.
    memory_button: Literal["private", "always", "never"] = "private"


class LLMConfig(_Section):
    provider: Literal["anthropic", "openai"] = "anthropic"
    model: str = "claude-sonnet-4-6"
    temperature: Temperature = 0.7
    max_tokens: Count = 4096


class ModelPreset(LLMConfig):
    """A `[models.NAME]` table: a model a chat may pick with /model. Provider and model are
    required; the other keys default as in [default_llm]."""

    provider: Literal["anthropic", "openai"]
    model: str


# Preset names are typed after /model and carried in a button's callback data (64 bytes at most).
PRESET_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,31}")
# /model's word for [default_llm], so no preset may take it.
DEFAULT_PRESET = "default"

# What answers when the default model fails and the file has no [fallback_llm]: used only while
# OPENAI_API_KEY is set (lib/llm/router.py), so a local server is never asked for gpt-4o.
IMPLICIT_FALLBACK = LLMConfig(provider="openai", model="gpt-4o")


class AgentConfig(_Section):
    max_steps: Count = 10
    # Tokens (input + output) one user may spend per day; 0 means no limit.
    daily_token_budget: NonNegativeInt = 0
    llm_retries: NonNegativeInt = 2


class PriceConfig(_Section):
    """US dollars per million tokens."""

    input: NonNegative = 0.0
    output: NonNegative = 0.0


def default_prices() -> dict[str, PriceConfig]:
    """The built-in prices; [prices] in the file adds to them or overrides them."""
    return {
        "claude-sonnet-4-6": PriceConfig(input=3.0, output=15.0),
        "claude-haiku-4-5": PriceConfig(input=1.0, output=5.0),
        "gpt-4o": PriceConfig(input=2.5, output=10.0),
        "gpt-4o-mini": PriceConfig(input=0.15, output=0.6),
        "gpt-4.1-mini": PriceConfig(input=0.4, output=1.6),
    }


class MemoryConfig(_Section):
    database_path: str | None = None
    max_context_messages: Count = 20
    context_token_budget: Count = 100_000
    recency_window: Count = 10
    system_prompt_buffer: NonNegativeInt = 8000
    # Tokens of retrieved memory injected into one prompt.
    retrieval_token_budget: NonNegativeInt = 2000
    auto_gc: bool = True
    max_entries: Count | None = None
    compaction_enabled: bool = True
    compaction_reserve_tokens: NonNegativeInt = 16384
    compaction_keep_recent_tokens: NonNegativeInt = 20000
    compaction_summary_max_tokens: Count = 2000
    extraction_enabled: bool = True
    extraction_model: str | None = None
    extraction_min_message_length: NonNegativeInt = 20
    extraction_debounce_seconds: NonNegative = 30.0
    extraction_confidence_threshold: Fraction = 0.7
    # Saving a fact that is already there raises its confidence by this share of what is left
    # to 1 (seed 001: +0.1 x (1 - c)) instead of storing a copy.
    reinforcement_rate: Fraction = 0.1
    # Confidence an extracted fact loses per week in which it is neither saved again nor
    # retrieved; `ash memory gc` retires it once what is left falls to `retire_below`.
    decay_per_week: Fraction = 0.05
    retire_below: Fraction = 0.1
    # Days a memory written while a turn held outside content waits for its owner to keep it
    # (/memory pending, `ash memory pending`) before gc discards it unreviewed.
    pending_days: Count = 14
    # Consolidation (lib/memory/consolidate.py), once a day in the memory service: duplicate facts
    # (the same words, or nearly) are proposed for merging. "propose": nothing changes until
    # reviewed (`ash memory review`); "auto": merged at once (audited, undoable); "off".
    consolidate: Literal["off", "propose", "auto"] = "propose"


class EmbeddingsConfig(_Section):
    provider: Literal["local", "openai", "none"] = "local"
    model: str = "multilingual-e5-small"
    dimensions: Count = 384


class SandboxConfig(_Section):
    # "auto": offer the bash tool only while a Docker engine answers; true: always (a missing
    # engine is an error the model hears); false: never.
    enabled: Literal["auto"] | bool = "auto"
    image: str = "ash-sandbox:latest"
    timeout: Positive = 60.0
    memory_limit: str = "512m"
    cpu_limit: Positive = 1.0
    pids_limit: Count = 128
    network_disabled: bool = True
    # Bytes of output returned to the model (head and tail kept).
    output_limit: Count = 16_000
    # Seconds a warm per-chat container may sit idle before Ash removes it (/workspace is kept).
    idle_timeout: Positive = 600.0
    # Size of each chat's /workspace filesystem: writing past it fails with "No space left on device".
    workspace_limit: str = "1g"
    # Days a chat may go without a command before its /workspace is deleted (0: never).
    workspace_ttl_days: NonNegative = 30.0
    # When a risky tool call (bash, schedule, memory writes, MCP tools, a web request the person
    # did not ask for) waits for the person's Run / Deny: "untrusted" while the turn holds
    # content from outside (web pages, documents, forwards, other members' messages, tool
    # output); "always"; "never".
    approval: Literal["untrusted", "always", "never"] = "untrusted"
    # Seconds a call may wait for its approval; then it is denied.
    approval_timeout: Positive = 600.0


class BraveSearchConfig(_Section):
    count: BraveCount = 5


class TranscriptionConfig(_Section):
    # "openai": an OpenAI-compatible /v1/audio/transcriptions endpoint (OPENAI_API_KEY, optional
    # when base_url is set); "local": faster-whisper on this machine (the local-transcription
    # extra); "none": voice notes get a reply saying Ash cannot listen to them.
    provider: Literal["openai", "local", "none"] = "openai"
    # None: "whisper-1" for openai, "base" (the only bundled model) for local.
    model: str | None = None
    # An origin such as http://whisper:8000 for a self-hosted server; None: OPENAI_BASE_URL or OpenAI.
    base_url: str | None = None
    # Bytes of audio accepted; a larger file is refused without being downloaded (the Bot API
    # serves files up to 20 MB).
    max_bytes: Count = 20_000_000
    # Seconds the local model stays loaded after its last use (it holds ~300 MB).
    idle_unload: Positive = 300.0


class DocumentsConfig(_Section):
    # Bytes of a file accepted; a larger one is refused without being downloaded.
    max_bytes: Count = 10_000_000
    # Pages of a PDF read; the rest is left out with a note.
    max_pages: Count = 100
    # Characters of a document that enter the turn (the rest is cut, with a note saying so);
    # memory keeps up to max_index_chars of it for later questions.
    max_chars: Count = 40_000
    max_index_chars: Count = 400_000
    # Seconds to read a PDF's text, waiting for a free reader included: the reader is a separate
    # process (lib/senses/parsing.py), killed at this limit; the person is told the file took too
    # long. A 100-page PDF of plain text takes a few seconds; one built to be slow, minutes a page.
    read_timeout: Positive = 60.0


class WebFetchConfig(_Section):
    enabled: bool = True
    # Bytes read from a page before it is cut off (on the wire and decompressed), and seconds for
    # the whole fetch: every lookup, redirect and byte, and reading the text out of the page.
    max_bytes: Count = 3_000_000
    timeout: Positive = 20.0
    max_redirects: NonNegativeInt = 5
    # Characters of extracted text handed to the model.
    max_chars: Count = 20_000


class McpServerConfig(_Section):
    """One MCP server whose tools Ash offers the model as NAME__tool: a command (stdio) or a url."""

    command: str | None = None
    args: list[str] = msgspec.field(default_factory=list)
    # Values may name environment variables as ${NAME}, resolved when the server starts.
    env: dict[str, str] = msgspec.field(default_factory=dict)
    url: str | None = None
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    # Seconds to start and list tools, and for one tool call; characters of output kept.
    start_timeout: Positive = 15.0
    call_timeout: Positive = 60.0
    output_limit: Count = 16_000


class McpConfig(_Section):
    servers: dict[str, McpServerConfig] = msgspec.field(default_factory=dict)


class SchedulerConfig(_Section):
    # Seconds a missed run (Ash was not running at its time) may be late and still run, with a
    # note that it is late; a later one is skipped and logged.
    max_lateness: NonNegative = 21600.0
    # Active scheduled tasks one person may have.
    max_jobs_per_user: Count = 50
    # Seconds between runs of a task that runs a prompt: each run is a turn of the model.
    min_prompt_interval: Positive = 3600.0


class ReplicaConfig(_Section):
    """Replication with Litestream (on when ASH_REPLICA_URL is set) and who the writer is."""

    # An S3-compatible endpoint (MinIO, R2, Tigris, B2); None: Amazon S3.
    endpoint: str | None = None
    region: str = "us-east-1"
    # Seconds between uploads of new transactions: the recovery point a lost machine can cost.
    sync_interval: Positive = 1.0
    # Hours of history the replica keeps for point-in-time restores (Litestream's snapshot retention).
    retention_hours: Positive = 168.0
    # The Fly machine id of the one machine that owns the database; None: every machine (a single
    # one) is the writer, or, with Fly's PRIMARY_REGION set, the machines of that region.
    writer: str | None = None


class Config(_Section):
    owner: int | None = None
    timezone: str = "UTC"
    workspace: str | None = None
    server: ServerConfig = msgspec.field(default_factory=ServerConfig)
    telegram: TelegramConfig = msgspec.field(default_factory=TelegramConfig)
    default_llm: LLMConfig = msgspec.field(default_factory=LLMConfig)
    # None: the file has no [fallback_llm] (IMPLICIT_FALLBACK may answer, see there).
    fallback_llm: LLMConfig | None = None
    # Models a chat may switch to with /model, by name ([models.NAME]).
    models: dict[str, ModelPreset] = msgspec.field(default_factory=dict)
    agent: AgentConfig = msgspec.field(default_factory=AgentConfig)
    prices: dict[str, PriceConfig] = msgspec.field(default_factory=default_prices)
    memory: MemoryConfig = msgspec.field(default_factory=MemoryConfig)
    embeddings: EmbeddingsConfig = msgspec.field(default_factory=EmbeddingsConfig)
    sandbox: SandboxConfig = msgspec.field(default_factory=SandboxConfig)
    brave_search: BraveSearchConfig = msgspec.field(default_factory=BraveSearchConfig)
    scheduler: SchedulerConfig = msgspec.field(default_factory=SchedulerConfig)
    transcription: TranscriptionConfig = msgspec.field(default_factory=TranscriptionConfig)
    documents: DocumentsConfig = msgspec.field(default_factory=DocumentsConfig)
    web_fetch: WebFetchConfig = msgspec.field(default_factory=WebFetchConfig)
    mcp: McpConfig = msgspec.field(default_factory=McpConfig)
    replica: ReplicaConfig = msgspec.field(default_factory=ReplicaConfig)
