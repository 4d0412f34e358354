"""Configuration: a TOML file for everything that is not a secret, the environment for the rest.

The file is `ASH_CONFIG`, else `$ASH_HOME/config.toml` (`ASH_HOME` defaults to `./data`).
A missing file means all defaults. Environment variables win over the file.
"""

from __future__ import annotations

import os
import tomllib
import zoneinfo
from pathlib import Path
from typing import Literal

import msgspec
import msgspec.inspect

from lib.errors import ConfigError

REPO_ROOT = Path(__file__).resolve().parent.parent
BUNDLED_WORKSPACE = REPO_ROOT / "workspace"
DEFAULT_TELEGRAM_API_BASE = "https://api.telegram.org"
DEFAULT_BRAVE_API_BASE = "https://api.search.brave.com"


class _Section(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A config table: unknown keys are typos and fail loudly."""


class ServerConfig(_Section):
    host: str = "127.0.0.1"
    port: int = 8080
    # Telegram updates are small; anything larger is refused with 413.
    max_body_bytes: int = 1_048_576
    # Seconds between background sweeps for pending or stale work.
    tick_interval: float = 15.0
    # Seconds a client may take to send a webhook body; then 408 and the connection is closed
    # (a body trickled at 1 byte/s would otherwise hold a connection for as long as it likes).
    body_timeout: float = 30.0


class TelegramConfig(_Section):
    allowed_users: list[str | int] = msgspec.field(default_factory=list)
    # Seconds between streaming edits in private chats; groups use group_stream_edit_interval.
    stream_edit_interval: float = 1.0
    group_stream_edit_interval: float = 3.0
    max_concurrent_chats: int = 8
    lease_seconds: float = 90.0
    max_attempts: int = 5
    inbox_retention_days: int = 7
    photo_max_bytes: int = 10_000_000


class LLMConfig(_Section):
    provider: Literal["anthropic", "openai"] = "anthropic"
    model: str = "claude-sonnet-4-6"
    temperature: float = 0.7
    max_tokens: int = 4096


def _default_fallback() -> LLMConfig:
    return LLMConfig(provider="openai", model="gpt-4o")


class AgentConfig(_Section):
    max_steps: int = 10
    # Tokens (input + output) one user may spend per day; 0 means no limit.
    daily_token_budget: int = 0
    llm_retries: int = 2


class PriceConfig(_Section):
    """US dollars per million tokens."""

    input: float = 0.0
    output: float = 0.0


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
    max_context_messages: int = 20
    context_token_budget: int = 100_000
    recency_window: int = 10
    system_prompt_buffer: int = 8000
    # Tokens of retrieved memory injected into one prompt.
    retrieval_token_budget: int = 2000
    auto_gc: bool = True
    max_entries: int | None = None
    compaction_enabled: bool = True
    compaction_reserve_tokens: int = 16384
    compaction_keep_recent_tokens: int = 20000
    compaction_summary_max_tokens: int = 2000
    extraction_enabled: bool = True
    extraction_model: str | None = None
    extraction_min_message_length: int = 20
    extraction_debounce_seconds: float = 30.0
    extraction_confidence_threshold: float = 0.7


class EmbeddingsConfig(_Section):
    provider: Literal["local", "openai", "none"] = "local"
    model: str = "all-MiniLM-L6-v2"
    dimensions: int = 384


class SandboxConfig(_Section):
    image: str = "ash-sandbox:latest"
    timeout: float = 60.0
    memory_limit: str = "512m"
    cpu_limit: float = 1.0
    pids_limit: int = 128
    network_disabled: bool = True
    # Bytes of output returned to the model (head and tail kept).
    output_limit: int = 16_000
    # Seconds a warm per-chat container may sit idle before Ash removes it (/workspace is kept).
    idle_timeout: float = 600.0
    # Size of each chat's /workspace filesystem: writing past it fails with "No space left on device".
    workspace_limit: str = "1g"
    # Days a chat may go without a command before its /workspace is deleted (0: never).
    workspace_ttl_days: float = 30.0


class BraveSearchConfig(_Section):
    count: int = 5


class Config(_Section):
    owner: int | None = None
    timezone: str = "UTC"
    workspace: str | None = None
    server: ServerConfig = msgspec.field(default_factory=ServerConfig)
    telegram: TelegramConfig = msgspec.field(default_factory=TelegramConfig)
    default_llm: LLMConfig = msgspec.field(default_factory=LLMConfig)
    fallback_llm: LLMConfig | None = msgspec.field(default_factory=_default_fallback)
    agent: AgentConfig = msgspec.field(default_factory=AgentConfig)
    prices: dict[str, PriceConfig] = msgspec.field(default_factory=_default_prices)
    memory: MemoryConfig = msgspec.field(default_factory=MemoryConfig)
    embeddings: EmbeddingsConfig = msgspec.field(default_factory=EmbeddingsConfig)
    sandbox: SandboxConfig = msgspec.field(default_factory=SandboxConfig)
    brave_search: BraveSearchConfig = msgspec.field(default_factory=BraveSearchConfig)


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
        anthropic_base_url=_origin(_env(environ, "ANTHROPIC_BASE_URL"), "ANTHROPIC_BASE_URL"),
        openai_base_url=_origin(_env(environ, "OPENAI_BASE_URL"), "OPENAI_BASE_URL"),
        brave_api_base=_origin(_env(environ, "BRAVE_API_BASE"), "BRAVE_API_BASE") or DEFAULT_BRAVE_API_BASE,
    )


def _friendly(error: msgspec.ValidationError, path: Path) -> str:
    # msgspec says "Expected `int`, got `str` - at `$.server.port`"; name the key as TOML does.
    text = str(error)
    message, _, where = text.partition(" - at `$")
    key = where.rstrip("`").lstrip(".")
    if message.startswith("Object contains unknown field"):
        field = message.split("`")[1] if "`" in message else "?"
        key = f"{key}.{field}" if key else field
        return f"{path}: unknown key `{key}`; see config.example.toml for the keys Ash reads"
    if message.startswith("Invalid enum value"):
        choices = _literal_choices(key)
        if choices:
            message = f"expected one of {', '.join(repr(c) for c in choices)}, got {message.split(' ', 3)[-1]}"
    return f"{path}: `{key or '(top level)'}`: {message[0].lower()}{message[1:]}"


def _literal_choices(key: str) -> tuple[str, ...]:
    """The allowed values of a Literal-typed key such as `default_llm.provider`."""
    info = msgspec.inspect.type_info(Config)
    for part in key.split("."):
        while isinstance(info, msgspec.inspect.UnionType):
            info = next((t for t in info.types if isinstance(t, msgspec.inspect.StructType)), info.types[0])
        if not isinstance(info, msgspec.inspect.StructType):
            return ()
        info = next((f.type for f in info.fields if f.name == part), None)
        if info is None:
            return ()
    return tuple(info.values) if isinstance(info, msgspec.inspect.LiteralType) else ()


def _check_values(config: Config, path: Path) -> None:
    """Checks a type cannot express."""
    try:
        zoneinfo.ZoneInfo(config.timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ConfigError(
            f"{path}: `timezone`: expected an IANA time zone name such as Europe/Berlin, got {config.timezone!r}"
        ) from None
    if not 1 <= config.server.port <= 65535:
        raise ConfigError(f"{path}: `server.port`: expected a port between 1 and 65535, got {config.server.port}")
    positives = {
        "telegram.max_concurrent_chats": config.telegram.max_concurrent_chats,
        "telegram.lease_seconds": config.telegram.lease_seconds,
        "agent.max_steps": config.agent.max_steps,
        "sandbox.timeout": config.sandbox.timeout,
        "sandbox.pids_limit": config.sandbox.pids_limit,
        "sandbox.cpu_limit": config.sandbox.cpu_limit,
        "embeddings.dimensions": config.embeddings.dimensions,
        "memory.recency_window": config.memory.recency_window,
    }
    for key, value in positives.items():
        if value <= 0:
            raise ConfigError(f"{path}: `{key}`: expected a number above 0, got {value}")
    threshold = config.memory.extraction_confidence_threshold
    if not 0 <= threshold <= 1:
        raise ConfigError(
            f"{path}: `memory.extraction_confidence_threshold`: expected a number from 0 to 1, got {threshold}"
        )


def parse_config(text: str, path: Path) -> Config:
    """Parse and validate TOML text; errors name the key and what is expected."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    try:
        config = msgspec.convert(raw, Config)
    except msgspec.ValidationError as exc:
        raise ConfigError(_friendly(exc, path)) from None
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
    )
