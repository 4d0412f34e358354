"""Health checks for `ash doctor`: one line per check, each problem with the command that fixes it.

These read only: a missing database or data folder is reported, never created. The checks that
ask something over the network (Telegram, the models, embeddings, Docker) are in
doctor_remote.py; they run concurrently, each under a short timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path

from lib.commands.doctor_remote import remote_checks
from lib.commands.doctor_result import Check
from lib.config import Settings, load_settings
from lib.errors import AshError

# Where `ash init` keeps the secrets (created 0600), beside the database.
SECRETS_FILE = "secrets.env"


def check_config() -> tuple[Check, Settings | None]:
    """The config file parses (or is absent and defaults apply)."""
    try:
        settings = load_settings()
    except AshError as exc:
        return Check("config", "fail", str(exc), "fix that key or line; config.example.toml lists every key"), None
    from lib.commands.common import home_named

    where = str(settings.config_path) if settings.config_file_found else f"{settings.config_path} (absent: defaults)"
    return Check("config", "ok", f"{where}; home {home_named(settings)}"), settings


def check_database(settings: Settings) -> Check:
    """The database exists and is migrated (opened without migrating; never created here)."""
    from lib.commands.common import open_db
    from lib.migrations import status

    path = settings.database_path
    if not path.exists():
        return Check(
            "database",
            "warn",
            f"{path} does not exist yet",
            "`ash init` sets Ash up here (`ash serve` creates it too); or set ASH_HOME to where your ash.db is",
        )
    try:
        conn = open_db(settings, migrate_first=False)
        try:
            state = status(conn)
        finally:
            conn.close()
    except Exception as exc:
        return Check("database", "fail", str(exc), f"check that {path} is an Ash database and readable")
    if state.unknown:
        return Check("database", "fail", "from a newer Ash: " + ", ".join(state.unknown), "upgrade Ash")
    if state.pending:
        return Check("database", "warn", f"{len(state.pending)} migration(s) pending", "run `ash db migrate`")
    return Check("database", "ok", f"{path} migrated")


def check_memory_index(settings: Settings) -> Check:
    """The vector index was built by the configured embedding model (after an upgrade or a config
    change it was not, and semantic search waits for `ash memory reindex`)."""
    from lib.commands.common import open_db
    from lib.memory.api import index_status
    from lib.migrations import status

    if not settings.database_path.exists():
        return Check("memory index", "ok", "no database yet")
    conn = open_db(settings, migrate_first=False)
    try:
        if status(conn).pending:
            return Check("memory index", "ok", "checked once the database is migrated")
        state = index_status(conn, settings)
    finally:
        conn.close()
    if state["needs_reindex"]:
        return Check("memory index", "warn", state["message"], "run `ash memory reindex` (it shows its progress)")
    return Check("memory index", "ok", f"{state['vectors']} vectors, {state['message']}")


def _private_files(settings: Settings) -> list[Path]:
    """Files that hold conversations or secrets, which nobody but their owner may read."""
    database = settings.database_path
    suffixes = ("", "-wal", "-shm")
    found = [database.with_name(database.name + suffix) for suffix in suffixes]
    found += sorted(database.parent.glob(f"{database.name}.pre-*.bak"))
    found.append(settings.home / SECRETS_FILE)
    return [path for path in found if path.exists()]


def check_permissions(settings: Settings) -> Check:
    """The database, its copies and secrets.env are private; the data folder is writable."""
    private = _private_files(settings)
    exposed = [path for path in private if path.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO)]
    if exposed:
        names = " ".join(str(path) for path in exposed)
        return Check("file permissions", "fail", f"readable by other accounts: {names}", f"chmod 600 {names}")
    folder = settings.database_path.parent
    if not folder.exists():
        return Check("file permissions", "ok", f"{folder} does not exist yet (`ash serve` creates it)")
    if not os.access(folder, os.W_OK | os.X_OK):
        return Check(
            "file permissions", "fail", f"{folder} is not writable by this user", f"chown -R $(id -un) {folder}"
        )
    database = settings.database_path
    if database.exists() and not os.access(database, os.R_OK | os.W_OK):
        return Check(
            "file permissions", "fail", f"{database} is not writable by this user", f"chown $(id -un) {database}"
        )
    return Check("file permissions", "ok", f"{len(private)} private file(s), data folder writable")


def check_allowed(settings: Settings) -> Check:
    """Somebody may talk to Ash: the owner, config.toml's allowed_users or `ash users allow` entries."""
    owner = settings.config.owner
    entries = _allowed_entries(settings)
    if owner is not None:
        more = f" and {len(entries)} allowed" if entries else ""
        return Check("allowed users", "ok", f"owner {owner}{more}")
    if entries:
        return Check("allowed users", "ok", f"{len(entries)} allowed: {', '.join(entries[:5])}")
    return Check(
        "allowed users",
        "fail",
        "nobody may talk to Ash: no owner and no allowed users",
        "`ash users allow ID` (your id: write to the bot, it answers with it), or `owner = ID` in config.toml",
    )


def _allowed_entries(settings: Settings) -> list[str]:
    """Allowed entries from config.toml and, when the database exists, from `ash users allow`."""
    from lib.commands.common import open_db
    from lib.conversation.access import listing

    if not settings.database_path.exists():
        return [str(entry) for entry in settings.config.telegram.allowed_users]
    conn = open_db(settings, migrate_first=False)
    try:
        return [row["entry"] for row in listing(conn, settings)]
    except Exception:  # an unmigrated database has no allowed_users table yet
        return [str(entry) for entry in settings.config.telegram.allowed_users]
    finally:
        conn.close()


def check_webhook_secret(settings: Settings) -> Check:
    secret = settings.secrets.telegram_webhook_secret
    if not secret:
        return Check(
            "webhook secret",
            "fail",
            f"TELEGRAM_WEBHOOK_SECRET is not set (not in the environment, nor in {settings.home / 'secrets.env'}): "
            "the webhook refuses every update (403)",
            "`ash init` makes one and registers it with Telegram; if a server runs elsewhere, use the same one",
        )
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,256}", secret):
        return Check("webhook secret", "fail", "Telegram allows only A-Z a-z 0-9 _ - (1-256)", "choose another")
    if len(secret) < 16:
        return Check("webhook secret", "warn", "shorter than 16 characters", "use `openssl rand -hex 32`")
    return Check("webhook secret", "ok", "set")


def check_llm_keys(settings: Settings) -> Check:
    """The default model's provider has a key (or, for OpenAI, a base URL); the fallback is named."""
    from lib.llm.router import KEY_VARIABLES, fallback, is_configured

    primary = settings.config.default_llm
    second = fallback(settings)
    if not is_configured(settings, primary):
        variable = KEY_VARIABLES[primary.provider] + (" (or OPENAI_BASE_URL)" if primary.provider == "openai" else "")
        detail = f"default provider {primary.provider}: {variable} is not set"
        hint = f"set {variable}"
        if settings.secrets.openai_base_url and primary.provider == "anthropic":
            hint += ', or for the server at OPENAI_BASE_URL: [default_llm] provider = "openai", model = one it serves'
        return Check("llm keys", "fail", detail, hint)
    if second is None:
        return Check("llm keys", "ok", f"{primary.provider}, no fallback")
    if not is_configured(settings, second):
        variable = KEY_VARIABLES[second.provider]
        return Check("llm keys", "warn", f"fallback {second.provider} has no key", f"set {variable} for a fallback")
    return Check("llm keys", "ok", f"{primary.provider}, fallback {second.provider}")


LOCAL_CHECKS: list[Callable[[Settings], Check]] = [
    check_database,
    check_memory_index,
    check_permissions,
    check_allowed,
    check_webhook_secret,
    check_llm_keys,
]


def _guarded(check: Callable[[Settings], Check], settings: Settings) -> Check:
    try:
        return check(settings)
    except Exception as exc:  # a broken check must not hide the others
        return Check(check.__name__.removeprefix("check_").replace("_", " "), "fail", f"check crashed: {exc}")


@contextlib.contextmanager
def _quiet_logs():
    """The checks report every failure themselves; the clients' warnings would say it twice."""
    logger = logging.getLogger("ash")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def run_checks() -> list[Check]:
    """Run every check; the others are skipped when the config cannot be read."""
    config_check, settings = check_config()
    if settings is None:
        return [config_check]
    with _quiet_logs():
        local = [_guarded(check, settings) for check in LOCAL_CHECKS]
        remote = asyncio.run(remote_checks(settings))
        from lib.commands.doctor_mcp import mcp_checks

        mcp = mcp_checks(settings)
    return [config_check, *local, *remote, *mcp]
