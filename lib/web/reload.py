"""Applying a changed config.toml or secrets.env to the running server, without a restart.

With the server running (the order of the Fly steps), `ash init --owner ID` wrote the owner and
the owner was still refused until a restart, and nothing said so. Now the server reads the files
again when one of them changes (checked every `[server] tick_interval`), on `POST /admin/reload`,
and on SIGHUP (granian then starts a fresh worker, which reads everything; the old one hands its
claims over on its way out).

The new values are copied into the running Settings in place, table by table, so every part
that holds a table sees them at its next read: who may talk (`owner`, `[telegram]
allowed_users`), the models and presets, the secrets the webhook, the admin API and the model
clients check (the model clients are rebuilt with new keys). What is fixed once the server runs
is named in the answer and the log instead, and keeps its old value until a restart.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from lib.config import Settings, load_settings
from lib.config.environment import SECRETS_FILE
from lib.redact import install as install_redaction
from lib.runtime import Runtime

log = logging.getLogger("ash")

# Read once at start-up (the listening socket, the database file, the vector index, the worker's
# slots, the outside MCP servers started): a change waits for a restart.
AT_START = (
    ("server", "host"),
    ("server", "port"),
    ("server", "max_connections"),
    ("server", "body_timeout"),
    ("memory", "database_path"),
    ("embeddings",),
    ("telegram", "max_concurrent_chats"),
    ("mcp",),
)
# Secrets some part holds in a client it built (the Telegram client's token).
SECRETS_AT_START = ("telegram_bot_token", "telegram_api_base")
MODEL_SECRETS = ("anthropic_api_key", "openai_api_key", "anthropic_base_url", "openai_base_url")


@dataclass
class Reloaded:
    """What a reload changed (config keys and secret names, never values), and what waits for a restart."""

    changed: list[str] = field(default_factory=list)
    restart_needed: list[str] = field(default_factory=list)


def _get(struct, path: tuple[str, ...]):
    for name in path:
        struct = getattr(struct, name)
    return struct


def _set(struct, path: tuple[str, ...], value) -> None:
    for name in path[:-1]:
        struct = getattr(struct, name)
    setattr(struct, path[-1], value)


def differences(old, new, prefix: tuple[str, ...] = ()) -> list[str]:
    """Dotted names of the fields that differ between two structs of the same type."""
    found = []
    for name in type(new).__struct_fields__:
        before, after = getattr(old, name), getattr(new, name)
        if isinstance(after, msgspec.Struct) and type(before) is type(after):
            found += differences(before, after, (*prefix, name))
        elif before != after:
            found.append(".".join((*prefix, name)))
    return found


def refresh(live, new) -> None:
    """Copy `new` into `live` field by field, keeping every nested table the same object."""
    for name in type(new).__struct_fields__:
        before, after = getattr(live, name), getattr(new, name)
        if isinstance(after, msgspec.Struct) and type(before) is type(after):
            refresh(before, after)
        else:
            setattr(live, name, after)


def apply(live: Settings, new: Settings) -> Reloaded:
    """Bring `live` to `new`, but for what is fixed at start (kept, and named in restart_needed)."""
    changed = differences(live.config, new.config)
    secrets = [name.upper() for name in differences(live.secrets, new.secrets)]
    at_start = [".".join(path) for path in AT_START if _get(live.config, path) != _get(new.config, path)]
    for path in AT_START:
        _set(new.config, path, _get(live.config, path))
    for name in SECRETS_AT_START:
        if getattr(live.secrets, name) != getattr(new.secrets, name):
            at_start.append(name.upper())
            setattr(new.secrets, name, getattr(live.secrets, name))
    refresh(live.config, new.config)
    refresh(live.secrets, new.secrets)
    live.config_file_found = new.config_file_found
    live.workspace = new.workspace  # read at every turn
    return Reloaded(changed=changed + secrets, restart_needed=at_start)


def watched(settings: Settings) -> tuple[Path, Path]:
    return settings.config_path, settings.home / SECRETS_FILE


def stamps(settings: Settings) -> tuple[float | None, ...]:
    """The files' modification times (None: absent): a change of either means read them again."""
    found = []
    for path in watched(settings):
        try:
            found.append(path.stat().st_mtime_ns)
        except OSError:
            found.append(None)
    return tuple(found)


async def reload(runtime: Runtime) -> Reloaded:
    """Read config.toml and secrets.env again and apply them; a file that does not parse changes
    nothing (ConfigError is raised with its reason)."""
    new = await asyncio.to_thread(load_settings)
    result = apply(runtime.settings, new)
    install_redaction(runtime.settings.secrets)  # a new secret is hidden from the log too
    if any(name.lower() in MODEL_SECRETS for name in result.changed):
        await runtime.close_llm_providers()  # rebuilt with the new keys on the next call
    if result.changed:
        log.warning("configuration reloaded: %s changed", ", ".join(result.changed))
    if result.restart_needed:
        log.warning("changed, applied at the next restart: %s", ", ".join(result.restart_needed))
    return result


async def watch(runtime: Runtime, every: float) -> None:
    """Reload whenever config.toml or secrets.env changes (a stat of each, every `every` seconds)."""
    seen = stamps(runtime.settings)
    while True:
        await asyncio.sleep(every)
        now = stamps(runtime.settings)
        if now == seen:
            continue
        seen = now
        try:
            await reload(runtime)
        except Exception as exc:  # a file that does not parse: the running configuration stays
            log.error("configuration not reloaded, the running one stays: %s", exc)
