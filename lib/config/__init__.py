"""Configuration, the face of lib/config/: `load_settings()` gives a process its `Settings` (the
file's tables, the environment's secrets, the paths derived from them).

Behind it: sections and tool_sections (the tables of config.toml as typed structs, each key
with its range and description, built on values), environment (secrets and endpoints, from the
environment only), messages (a bad file explained in TOML's words) and settings (reading and
checking the file, resolving the paths).
"""

from lib.config.environment import DEFAULT_BRAVE_API_BASE, DEFAULT_TELEGRAM_API_BASE, Secrets, read_secrets
from lib.config.sections import (
    DEFAULT_PRESET,
    IMPLICIT_FALLBACK,
    AgentConfig,
    Config,
    EmbeddingsConfig,
    LLMConfig,
    MemoryConfig,
    ModelPreset,
    PriceConfig,
    ServerConfig,
    TelegramConfig,
)
from lib.config.settings import BUNDLED_WORKSPACE, REPO_ROOT, Settings, load_settings, parse_config
from lib.config.tool_sections import (
    BraveSearchConfig,
    DocumentsConfig,
    McpConfig,
    McpServerConfig,
    ReplicaConfig,
    SandboxConfig,
    SchedulerConfig,
    TranscriptionConfig,
    WebFetchConfig,
)

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
