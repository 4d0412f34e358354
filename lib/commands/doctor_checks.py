"""Health checks for `ash doctor`: one line per check, each failure with a hint."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from lib.config import Settings, load_settings
from lib.errors import AshError

TOKEN_PATTERN = re.compile(r"^\d+:[A-Za-z0-9_-]{30,}$")


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # "ok", "warn" or "fail"
    detail: str
    hint: str = ""


def check_config() -> tuple[Check, Settings | None]:
    """The config file parses (or is absent and defaults apply)."""
    try:
        settings = load_settings()
    except AshError as exc:
        return Check("config", "fail", str(exc), "fix the key named above; config.example.toml lists them all"), None
    where = str(settings.config_path) if settings.config_file_found else f"{settings.config_path} (absent: defaults)"
    return Check("config", "ok", where), settings


def check_database(settings: Settings) -> Check:
    from lib.db import connect
    from lib.migrations import status

    try:
        conn = connect(settings.database_path)
        state = status(conn)
        conn.close()
    except Exception as exc:
        return Check("database", "fail", str(exc), "check that the directory exists and is writable")
    if state.unknown:
        return Check("database", "fail", "from a newer Ash: " + ", ".join(state.unknown), "upgrade Ash")
    if state.pending:
        return Check("database", "warn", f"{len(state.pending)} migration(s) pending", "run `ash db migrate`")
    return Check("database", "ok", f"{settings.database_path} migrated")


def check_telegram_token(settings: Settings) -> Check:
    token = settings.secrets.telegram_bot_token
    if not token:
        return Check("telegram token", "fail", "TELEGRAM_BOT_TOKEN is not set", "get a token from @BotFather")
    if not TOKEN_PATTERN.match(token):
        return Check("telegram token", "fail", "TELEGRAM_BOT_TOKEN does not look like 123456:ABC...", "copy it again")
    return Check("telegram token", "ok", f"bot id {settings.bot_id}")


def check_webhook_secret(settings: Settings) -> Check:
    secret = settings.secrets.telegram_webhook_secret
    if not secret:
        return Check(
            "webhook secret",
            "fail",
            "TELEGRAM_WEBHOOK_SECRET is not set: the webhook refuses every update (403)",
            "set it to 32+ random characters (A-Z a-z 0-9 _ -), e.g. `openssl rand -hex 32`",
        )
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,256}", secret):
        return Check("webhook secret", "fail", "Telegram allows only A-Z a-z 0-9 _ - (1-256)", "choose another")
    if len(secret) < 16:
        return Check("webhook secret", "warn", "shorter than 16 characters", "use `openssl rand -hex 32`")
    return Check("webhook secret", "ok", "set")


def check_llm_keys(settings: Settings) -> Check:
    keys = {"anthropic": settings.secrets.anthropic_api_key, "openai": settings.secrets.openai_api_key}
    if settings.secrets.openai_base_url:
        keys["openai"] = keys["openai"] or "(base url)"
    primary = settings.config.default_llm.provider
    fallback = settings.config.fallback_llm.provider if settings.config.fallback_llm else None
    env = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY (or OPENAI_BASE_URL)"}
    if not keys[primary]:
        detail = f"default provider {primary}: {env[primary]} is not set"
        return Check("llm keys", "fail", detail, f"set {env[primary]}")
    if fallback and not keys[fallback]:
        return Check("llm keys", "warn", f"fallback {fallback} has no key", f"set {env[fallback]} for a fallback")
    return Check("llm keys", "ok", f"{primary}" + (f", fallback {fallback}" if fallback else ""))


def check_docker(settings: Settings) -> Check:
    """The engine DOCKER_HOST names answers and has the sandbox image (else bash tells the model why)."""
    from lib.errors import DockerError
    from lib.sandbox.container import connect

    image = settings.config.sandbox.image
    try:
        client = connect(timeout=10)
    except DockerError as exc:
        return Check(
            "docker host",
            "fail",
            f"{exc.message[:200]}; the bash tool answers with this error until it is fixed",
            "start Docker (or `.ci/docker.sh` for a private dockerd) and set DOCKER_HOST; a tcp:// host also "
            "needs DOCKER_TLS_VERIFY=1 and DOCKER_CERT_PATH",
        )
    try:
        client.images.get(image)
    except Exception:
        return Check(
            "docker host",
            "warn",
            f"engine reachable, sandbox image {image} missing",
            "run `ash sandbox build` (no registry: `ash sandbox build --offline`)",
        )
    finally:
        client.close()
    return Check("docker host", "ok", f"engine reachable, image {image} present")


SETTINGS_CHECKS: list[Callable[[Settings], Check]] = [
    check_database,
    check_telegram_token,
    check_webhook_secret,
    check_llm_keys,
    check_docker,
]


def run_checks() -> list[Check]:
    """Run every check; later checks are skipped when the config cannot be read."""
    config_check, settings = check_config()
    results = [config_check]
    if settings is None:
        return results
    for check in SETTINGS_CHECKS:
        try:
            results.append(check(settings))
        except Exception as exc:  # a broken check must not hide the others
            results.append(Check(check.__name__.removeprefix("check_"), "fail", f"check crashed: {exc}"))
    return results
