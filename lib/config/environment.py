"""Secrets and endpoints: from the environment and $ASH_HOME/secrets.env (the environment wins),
never from config.toml, never logged.

`ash init` writes secrets.env (0600); every command and the server read it themselves, so a new
shell needs no `set -a; . secrets.env` (and `ash doctor` there no longer told people to make new
secrets that existed all along).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from pathlib import Path

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


SECRETS_FILE = "secrets.env"
# The names secrets.env may set: Ash's secrets and endpoints (SPEC), nothing else.
FILE_NAMES = frozenset(
    {
        "TELEGRAM_BOT_TOKEN",
        "TELEGRAM_WEBHOOK_SECRET",
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "BRAVE_SEARCH_API_KEY",
        "ASH_ADMIN_TOKEN",
        "TELEGRAM_API_BASE",
        "ANTHROPIC_BASE_URL",
        "OPENAI_BASE_URL",
        "BRAVE_API_BASE",
        "ASH_REPLICA_URL",
    }
)
_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")


def read_env_file(path: Path) -> dict[str, str]:
    """NAME=VALUE lines of a secrets file as a shell reads them (comments, blank lines and a
    leading `export` skipped; quotes removed); {} when there is no file."""
    if not path.is_file():
        return {}
    found = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        name, sep, value = line.strip().removeprefix("export ").partition("=")
        if not sep or not _NAME.fullmatch(name.strip()):
            continue
        try:
            words = shlex.split(value, comments=True)
        except ValueError as exc:
            raise ConfigError(f"{path}: line {number}: {exc} (the value of {name.strip()})") from None
        found[name.strip()] = words[0] if words else ""
    return found


def with_secrets_file(environ: Mapping[str, str], home: Path) -> dict[str, str]:
    """The environment, with what $ASH_HOME/secrets.env sets for the names it may set underneath:
    a variable set (and not blank) in the environment wins."""
    merged = {name: value for name, value in read_env_file(home / SECRETS_FILE).items() if name in FILE_NAMES}
    merged.update({name: value for name, value in environ.items() if value.strip() or name not in merged})
    return merged


def env_value(environ: Mapping[str, str], name: str) -> str | None:
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


def read_secrets(environ: Mapping[str, str] = os.environ) -> Secrets:
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
