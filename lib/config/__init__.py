"""Configuration, the face of lib/config/: `load_settings()` gives a process its `Settings` (the
file's tables, the environment's secrets, the paths derived from them).

Behind it: sections (the tables of config.toml as typed structs), environment (secrets and
endpoints, from the environment only), messages (a bad file explained in TOML's words) and
settings (reading and checking the file, resolving the paths).
"""

from lib.config.environment import DEFAULT_BRAVE_API_BASE, DEFAULT_TELEGRAM_API_BASE, Secrets, read_secrets
from lib.config.sections import (
    DEFAULT_PRESET,
    IMPLICIT_FALLBACK,
    AgentConfig,
    BraveSearchConfig,
    Config,
    DocumentsConfig,
    EmbeddingsConfig,
    LLMConfig,
    McpConfig,
    McpServerConfig,
    MemoryConfig,
    ModelPreset,
    PriceConfig,
    ReplicaConfig,
    SandboxConfig,
    SchedulerConfig,
    ServerConfig,
    TelegramConfig,
    TranscriptionConfig,
    WebFetchConfig,
)
from lib.config.settings import BUNDLED_WORKSPACE, REPO_ROOT, Settings, load_settings, parse_config

__all__ = [
    "BUNDLED_WORKSPACE",
    "DEFAULT_BRAVE_API_BASE",
    "DEFAULT_PRESET",
    "DEFAULT_TELEGRAM_API_BASE",
    "IMPLICIT_FALLBACK",
    "REPO_ROOT",
    "AgentConfig",
    "BraveSearchConfig",
    "Config",
    "DocumentsConfig",
    "EmbeddingsConfig",
    "LLMConfig",
    "McpConfig",
    "McpServerConfig",
    "MemoryConfig",
    "ModelPreset",
    "PriceConfig",
    "ReplicaConfig",
    "SandboxConfig",
    "SchedulerConfig",
    "Secrets",
    "ServerConfig",
    "Settings",
    "TelegramConfig",
    "TranscriptionConfig",
    "WebFetchConfig",
    "load_settings",
    "parse_config",
    "read_secrets",
]
