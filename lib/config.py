"""Configuration: a TOML file for everything that is not a secret, the environment for the rest.

The file is `ASH_CONFIG`, else `$ASH_HOME/config.toml` (`ASH_HOME` defaults to `./data`).
A missing file means all defaults. Environment variables win over the file.
"""

from __future__ import annotations

import os
import re
import tomllib
import zoneinfo
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
import msgspec.inspect

from lib.errors import ConfigError

REPO_ROOT = Path(__file__).resolve().parent.parent
BUNDLED_WORKSPACE = REPO_ROOT / "workspace"
DEFAULT_TELEGRAM_API_BASE = "https://api.telegram.org"
DEFAULT_BRAVE_API_BASE = "https://api.search.brave.com"

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


def _default_prices() -> dict[str, PriceConfig]:
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
    prices: dict[str, PriceConfig] = msgspec.field(default_factory=_default_prices)
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


class Secrets(msgspec.Struct, kw_only=True):
    """Secrets and endpoints; only ever read from the environment, never logged."""

    telegram_bot_token: str | None = None
    telegram_webhook_secret: str | None = None
    anthropic_api_key: str | None = None
    openai_api_key: str | None = None
    brave_search_api_key: str | None = None
    admin_token: str | None = None
    telegram_api_base: str = DEFAULT_TELEGRAM_API_BASE
    anthropic_base_url: str | None = None
    openai_base_url: str | None = None
    brave_api_base: str = DEFAULT_BRAVE_API_BASE

    def __repr__(self) -> str:
        return "Secrets(<hidden>)"


class Settings(msgspec.Struct, kw_only=True):
    """Everything a process needs to know, resolved once at start."""

    config: Config
    secrets: Secrets
    home: Path
    config_path: Path
    config_file_found: bool
    database_path: Path
    workspace: Path
    # ASH_REPLICA_URL (s3://bucket/path): replicate the database with Litestream; None: off.
    replica_url: str | None = None

    @property
    def bot_id(self) -> int:
        """The numeric bot id: the part of the token before the colon (0 without a token)."""
        token = self.secrets.telegram_bot_token or ""
        head = token.split(":", 1)[0]
        return int(head) if head.isdigit() else 0


def _env(environ: dict[str, str] | os._Environ, name: str) -> str | None:
    value = environ.get(name, "").strip()
    return value or None


def _origin(value: str | None, name: str) -> str | None:
    if value is None:
        return None
    if not value.startswith(("http://", "https://")):
        raise ConfigError(f"{name}: expected an http(s) origin such as https://api.example.com, got {value!r}")
    return value.rstrip("/")


def _api_origin(value: str | None, name: str) -> str | None:
    """An LLM endpoint without its API version: the clients append `/v1` themselves, and Ollama's
    documented form is http://127.0.0.1:11434/v1 (so both forms name the same server)."""
    origin = _origin(value, name)
    return origin.removesuffix("/v1") if origin else None


def read_secrets(environ: dict[str, str] | os._Environ = os.environ) -> Secrets:
    """Read secrets and endpoint overrides from the environment."""
    return Secrets(
        telegram_bot_token=_env(environ, "TELEGRAM_BOT_TOKEN"),
        telegram_webhook_secret=_env(environ, "TELEGRAM_WEBHOOK_SECRET"),
        anthropic_api_key=_env(environ, "ANTHROPIC_API_KEY"),
        openai_api_key=_env(environ, "OPENAI_API_KEY"),
        brave_search_api_key=_env(environ, "BRAVE_SEARCH_API_KEY"),
        admin_token=_env(environ, "ASH_ADMIN_TOKEN"),
        telegram_api_base=_origin(_env(environ, "TELEGRAM_API_BASE"), "TELEGRAM_API_BASE") or DEFAULT_TELEGRAM_API_BASE,
        anthropic_base_url=_api_origin(_env(environ, "ANTHROPIC_BASE_URL"), "ANTHROPIC_BASE_URL"),
        openai_base_url=_api_origin(_env(environ, "OPENAI_BASE_URL"), "OPENAI_BASE_URL"),
        brave_api_base=_origin(_env(environ, "BRAVE_API_BASE"), "BRAVE_API_BASE") or DEFAULT_BRAVE_API_BASE,
    )


RANGE_ERROR = re.compile(r"Expected `(?:int|float)` [<>]=? ")
TOML_POSITION = re.compile(r"^(?P<reason>.*) \(at line (?P<line>\d+), column (?P<column>\d+)\)$")


def _friendly(error: msgspec.ValidationError, raw: dict[str, Any], path: Path) -> str:
    # msgspec says "Expected `int`, got `str` - at `$.server.port`"; name the key as TOML does.
    text = str(error)
    message, _, where = text.partition(" - at `$")
    parts = _key_parts(where.rstrip("`"), raw)
    if message.startswith("Object contains unknown field"):
        field = message.split("`")[1] if "`" in message else "?"
        return f"{path}: unknown key `{_toml_key([*parts, field])}`; see config.example.toml for the keys Ash reads"
    info = _type_at(parts)
    if message.startswith("Invalid enum value"):
        choices = _choices(info)
        if choices:
            message = f"expected one of {', '.join(choices)}, got {message.split(' ', 3)[-1]}"
    elif RANGE_ERROR.match(message):
        message = f"expected {_range(info)}, got {_value_at(raw, parts)}"
    return f"{path}: `{_toml_key(parts) or '(top level)'}`: {message[0].lower()}{message[1:]}"


# One step of msgspec's error path: `.name`, or `[...]` / `[3]` inside a dict / list.
PATH_STEP = re.compile(r"\.([^.\[]+)|(\[[^\]]*\])")
BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _key_parts(where: str, raw: dict[str, Any]) -> list[str]:
    """msgspec's error path (`.models[...].temperature`) as the keys it names (models, fast,
    temperature). msgspec does not say which table of a dict failed (`[...]`), so the first one
    that does not convert on its own is named."""
    parts: list[str] = []
    for name, index in PATH_STEP.findall(where):
        if name:
            parts.append(name)
        elif index == "[...]":
            parts.append(_failing_entry(raw, parts))
        elif parts:
            parts[-1] += index  # a list position: allowed_users[2]
    return parts


def _failing_entry(raw: dict[str, Any], parts: list[str]) -> str:
    """The name of the first table under the dict at `parts` that fails on its own."""
    info = _type_at(parts)
    tables = _value_at(raw, parts)
    if isinstance(info, msgspec.inspect.DictType) and isinstance(tables, dict):
        kind = info.value_type
        if isinstance(kind, msgspec.inspect.StructType):
            for name, table in tables.items():
                try:
                    msgspec.convert(table, kind.cls)
                except msgspec.ValidationError:
                    return name
    return "..."


def _toml_key(parts: list[str]) -> str:
    """Dotted keys as TOML writes them: `prices."gpt-4.1".input`."""
    return ".".join(part if BARE_KEY.fullmatch(part.split("[")[0]) else f'"{part}"' for part in parts)


def _type_at(parts: list[str]) -> msgspec.inspect.Type | None:
    """The declared type of a key such as default_llm.temperature or models.NAME.model (None if
    unknown)."""
    info: msgspec.inspect.Type | None = msgspec.inspect.type_info(Config)
    for part in parts:
        if isinstance(info, msgspec.inspect.DictType):  # `part` names one of its tables
            info = info.value_type
            continue
        struct = _struct_in(info)
        if struct is None:
            return None
        info = next((f.type for f in struct.fields if f.name == part), None)
    return info


def _struct_in(info: msgspec.inspect.Type | None) -> msgspec.inspect.StructType | None:
    """The struct a type is, or the struct inside an optional one (`LLMConfig | None`)."""
    if isinstance(info, msgspec.inspect.UnionType):
        info = next((t for t in info.types if isinstance(t, msgspec.inspect.StructType)), None)
    return info if isinstance(info, msgspec.inspect.StructType) else None


def _choices(info: msgspec.inspect.Type | None) -> list[str]:
    """The allowed values of a Literal key (or of a Literal-or-bool one such as `sandbox.enabled`)."""
    types = info.types if isinstance(info, msgspec.inspect.UnionType) else (info,)
    found = []
    for kind in types:
        if isinstance(kind, msgspec.inspect.LiteralType):
            found += [f'"{value}"' for value in kind.values]
        elif isinstance(kind, msgspec.inspect.BoolType):
            found += ["true", "false"]
    return found


def _range(info: msgspec.inspect.Type | None) -> str:
    """A number's allowed range in words, from its declared bounds."""
    if isinstance(info, msgspec.inspect.UnionType):  # `int | None`: the number's bounds
        info = next((t for t in info.types if not isinstance(t, msgspec.inspect.NoneType)), None)
    low = getattr(info, "ge", None)
    high = getattr(info, "le", None)
    if low is not None and high is not None:
        return f"a number from {low} to {high}"
    if getattr(info, "gt", None) is not None:
        return f"a number above {info.gt}"
    if low is not None:
        return f"a number of at least {low}"
    return f"a number of at most {high}"


def _value_at(raw: dict[str, Any], parts: list[str]) -> Any:
    value: Any = raw
    for part in parts:
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _toml_error(exc: tomllib.TOMLDecodeError, text: str, path: Path) -> str:
    """Where the file stops being TOML: the line number and the line itself."""
    found = TOML_POSITION.match(str(exc))
    if found is None:  # "Unclosed array (at end of document)" and the like
        return f"{path}: not valid TOML: {exc}"
    number = int(found["line"])
    lines = text.splitlines()
    line = lines[number - 1].strip() if number <= len(lines) else ""
    reason = found["reason"][0].lower() + found["reason"][1:]
    return f"{path}: line {number} is not valid TOML ({reason}, column {found['column']}): {line}"


def _check_values(config: Config, path: Path) -> None:
    """Checks a type cannot express."""
    try:
        zoneinfo.ZoneInfo(config.timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ConfigError(
            f"{path}: `timezone`: expected an IANA time zone name such as Europe/Berlin, got {config.timezone!r}"
        ) from None
    _check_preset_names(config, path)
    _check_mcp_servers(config, path)
    models = [("default_llm", config.default_llm), ("fallback_llm", config.fallback_llm)]
    models += [(_toml_key(["models", name]), preset) for name, preset in config.models.items()]
    for section, llm in models:
        if llm is not None and llm.provider == "anthropic" and llm.temperature > 1:
            raise ConfigError(
                f"{path}: `{section}.temperature`: Anthropic accepts a number from 0 to 1, got {llm.temperature}"
            )


MCP_SERVER_NAME = re.compile(r"[A-Za-z0-9_-]{1,32}")


def _check_mcp_servers(config: Config, path: Path) -> None:
    """Each MCP server is started one way, and its name can prefix a tool name (NAME__tool)."""
    for name, server in config.mcp.servers.items():
        key = _toml_key(["mcp", "servers", name])
        if not MCP_SERVER_NAME.fullmatch(name) or "__" in name:
            raise ConfigError(
                f"{path}: `{key}`: a server name is 1 to 32 letters, digits, '-' or '_' without '__' "
                f"(its tools are offered as NAME__tool), got {name!r}"
            )
        if (server.command is None) == (server.url is None):
            raise ConfigError(f"{path}: `{key}`: give either `command` (stdio) or `url` (Streamable HTTP)")


def _check_preset_names(config: Config, path: Path) -> None:
    """A preset's name is what people type after /model."""
    for name in config.models:
        key = _toml_key(["models", name])
        if name == DEFAULT_PRESET:
            raise ConfigError(f'{path}: `{key}`: "default" means [default_llm] in /model; give the preset another name')
        if not PRESET_NAME.fullmatch(name):
            raise ConfigError(
                f"{path}: `{key}`: a preset name is 1 to 32 lower-case letters, digits, '.', '-' or '_', "
                f"starting with a letter or digit (it is typed as /model NAME), got {name!r}"
            )


def parse_config(text: str, path: Path) -> Config:
    """Parse and validate TOML text; errors name the key (or the line) and what is expected."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(_toml_error(exc, text, path)) from None
    try:
        config = msgspec.convert(raw, Config)
    except msgspec.ValidationError as exc:
        raise ConfigError(_friendly(exc, raw, path)) from None
    # Prices given in the file add to (or override) the built-in ones rather than replace them.
    config.prices = {**_default_prices(), **config.prices}
    _check_values(config, path)
    return config


def _expand(value: str, home: Path) -> Path:
    path = Path(os.path.expanduser(value.replace("$ASH_HOME", str(home))))
    return path if path.is_absolute() else Path.cwd() / path


def load_settings(environ: dict[str, str] | os._Environ = os.environ) -> Settings:
    """Resolve the config file, the environment and the paths derived from them."""
    home = Path(_env(environ, "ASH_HOME") or "./data").expanduser()
    home = home if home.is_absolute() else Path.cwd() / home
    config_path = Path(_env(environ, "ASH_CONFIG") or home / "config.toml").expanduser()
    found = config_path.is_file()
    if _env(environ, "ASH_CONFIG") and not found:
        raise ConfigError(f"ASH_CONFIG points at {config_path}, which does not exist")
    config = parse_config(config_path.read_text(encoding="utf-8"), config_path) if found else Config()
    port = _env(environ, "PORT")
    if port is not None:
        if not port.isdigit() or not 1 <= int(port) <= 65535:
            raise ConfigError(f"PORT: expected a port number between 1 and 65535, got {port!r}")
        config.server.port = int(port)
    database = config.memory.database_path
    workspace = config.workspace
    return Settings(
        config=config,
        secrets=read_secrets(environ),
        home=home,
        config_path=config_path,
        config_file_found=found,
        database_path=_expand(database, home) if database else home / "ash.db",
        workspace=_expand(workspace, home) if workspace else BUNDLED_WORKSPACE,
        replica_url=_env(environ, "ASH_REPLICA_URL"),
    )
