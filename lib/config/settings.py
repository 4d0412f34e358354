"""Configuration: a TOML file for everything that is not a secret, the environment for the rest.

The file is `ASH_CONFIG`, else `$ASH_HOME/config.toml`. `ASH_HOME` defaults to the `data/` folder
of the checkout Ash runs from, whatever the shell's directory (an installed package without a
checkout: `~/.local/share/ash`). A missing file means all defaults. Secrets come from the
environment and `$ASH_HOME/secrets.env`; the environment wins over both files.
"""

from __future__ import annotations

import os
import re
import tomllib
import zoneinfo
from collections.abc import Mapping
from pathlib import Path

import msgspec

from lib.config.environment import Secrets, env_value, read_secrets, with_secrets_file
from lib.config.messages import explain, toml_error, toml_key
from lib.config.people import parse_entry, parse_user_id
from lib.config.sections import DEFAULT_PRESET, PRESET_NAME, Config, default_prices
from lib.errors import ConfigError, InvalidUserEntry

REPO_ROOT = Path(__file__).resolve().parents[2]
BUNDLED_WORKSPACE = REPO_ROOT / "workspace"


class Settings(msgspec.Struct, kw_only=True):
    """Everything a process needs to know, resolved once at start."""

    config: Config
    secrets: Secrets
    home: Path
    config_path: Path
    config_file_found: bool
    # Where `home` came from: "ASH_HOME" (the environment) or "default" (default_home()).
    home_from: str
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


def _check_values(config: Config, path: Path) -> None:
    """Checks a type cannot express."""
    try:
        zoneinfo.ZoneInfo(config.timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ConfigError(
            f"{path}: `timezone`: expected an IANA time zone name such as Europe/Berlin, got {config.timezone!r}"
        ) from None
    _check_people(config, path)
    _check_preset_names(config, path)
    _check_mcp_servers(config, path)
    models = [("default_llm", config.default_llm), ("fallback_llm", config.fallback_llm)]
    models += [(toml_key(["models", name]), preset) for name, preset in config.models.items()]
    for section, llm in models:
        if llm is not None and llm.provider == "anthropic" and llm.temperature > 1:
            raise ConfigError(
                f"{path}: `{section}.temperature`: Anthropic accepts a number from 0 to 1, got {llm.temperature}"
            )


def _check_people(config: Config, path: Path) -> None:
    """`owner` and `allowed_users` by the rules `ash users allow` applies (lib/config/people.py)."""
    if config.owner is not None:
        try:
            parse_user_id(config.owner)
        except InvalidUserEntry as exc:
            raise ConfigError(f"{path}: `owner`: {exc}") from None
    for index, entry in enumerate(config.telegram.allowed_users):
        try:
            parse_entry(entry)
        except InvalidUserEntry as exc:
            raise ConfigError(f"{path}: `telegram.allowed_users[{index}]`: {exc}") from None


MCP_SERVER_NAME = re.compile(r"[A-Za-z0-9_-]{1,32}")


def _check_mcp_servers(config: Config, path: Path) -> None:
    """Each MCP server is started one way, and its name can prefix a tool name (NAME__tool)."""
    for name, server in config.mcp.servers.items():
        key = toml_key(["mcp", "servers", name])
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
        key = toml_key(["models", name])
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
        raise ConfigError(toml_error(exc, text, path)) from None
    try:
        config = msgspec.convert(raw, Config)
    except msgspec.ValidationError as exc:
        raise ConfigError(explain(exc, raw, path)) from None
    # Prices given in the file add to (or override) the built-in ones rather than replace them.
    config.prices = {**default_prices(), **config.prices}
    _check_values(config, path)
    return config


def _expand(value: str, home: Path) -> Path:
    path = Path(os.path.expanduser(value.replace("$ASH_HOME", str(home))))
    return path if path.is_absolute() else Path.cwd() / path


def default_home() -> Path:
    """Where Ash keeps its data when ASH_HOME is not set: the checkout's `data/` (where `.ci/setup`
    installed it), so `ash users show` run from another directory finds the same setup instead of
    making a blank one there; an installed package without a checkout uses ~/.local/share/ash."""
    if (REPO_ROOT / "pyproject.toml").is_file():
        return REPO_ROOT / "data"
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "ash"


def load_settings(environ: Mapping[str, str] = os.environ) -> Settings:
    """Resolve the config file, the environment (and secrets.env) and the paths derived from them."""
    given = env_value(environ, "ASH_HOME")
    home = Path(given).expanduser() if given else default_home()
    home = home if home.is_absolute() else Path.cwd() / home
    environ = with_secrets_file(environ, home)
    config_path = Path(env_value(environ, "ASH_CONFIG") or home / "config.toml").expanduser()
    found = config_path.is_file()
    if env_value(environ, "ASH_CONFIG") and not found:
        raise ConfigError(f"ASH_CONFIG points at {config_path}, which does not exist")
    config = parse_config(config_path.read_text(encoding="utf-8"), config_path) if found else Config()
    port = env_value(environ, "PORT")
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
        home_from="ASH_HOME" if given else "default",
        database_path=_expand(database, home) if database else home / "ash.db",
        workspace=_expand(workspace, home) if workspace else BUNDLED_WORKSPACE,
        replica_url=env_value(environ, "ASH_REPLICA_URL"),
    )
