"""Secrets and endpoints: read from the environment only, never from the file, never logged."""

from __future__ import annotations

import os

import msgspec

from lib.errors import ConfigError

DEFAULT_TELEGRAM_API_BASE = "https://api.telegram.org"
DEFAULT_BRAVE_API_BASE = "https://api.search.brave.com"


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


def env_value(environ: dict[str, str] | os._Environ, name: str) -> str | None:
    """The variable's value without surrounding space; None when unset or blank."""
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
        telegram_bot_token=env_value(environ, "TELEGRAM_BOT_TOKEN"),
        telegram_webhook_secret=env_value(environ, "TELEGRAM_WEBHOOK_SECRET"),
        anthropic_api_key=env_value(environ, "ANTHROPIC_API_KEY"),
        openai_api_key=env_value(environ, "OPENAI_API_KEY"),
        brave_search_api_key=env_value(environ, "BRAVE_SEARCH_API_KEY"),
        admin_token=env_value(environ, "ASH_ADMIN_TOKEN"),
        telegram_api_base=(
            _origin(env_value(environ, "TELEGRAM_API_BASE"), "TELEGRAM_API_BASE") or DEFAULT_TELEGRAM_API_BASE
        ),
        anthropic_base_url=_api_origin(env_value(environ, "ANTHROPIC_BASE_URL"), "ANTHROPIC_BASE_URL"),
        openai_base_url=_api_origin(env_value(environ, "OPENAI_BASE_URL"), "OPENAI_BASE_URL"),
        brave_api_base=_origin(env_value(environ, "BRAVE_API_BASE"), "BRAVE_API_BASE") or DEFAULT_BRAVE_API_BASE,
    )
