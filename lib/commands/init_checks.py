"""What `ash init` asks the outside: Telegram (the token, through getMe, and the webhook) and the
model provider (one token with the saved key). A refused token or key is asked for again when
init is interactive, and the new one saved; init reports and the person decides, so nothing is
retried."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import click

from lib.commands.common import settings_or_exit
from lib.commands.common import webhook_url as checked_webhook_url
from lib.commands.init_files import write_secrets
from lib.config import Settings
from lib.errors import InvalidToken, NetworkError, TelegramError, TimedOut

TOKEN_NAME = "TELEGRAM_BOT_TOKEN"  # noqa: S105
SECRET_NAME = "TELEGRAM_WEBHOOK_SECRET"  # noqa: S105
PROVIDER_KEYS = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}


def _bot[T](settings: Settings, token: str, action: Callable[[Any], Awaitable[T]]) -> T:
    """One Bot API exchange with a short-lived client (no retries: init reports, the person decides)."""
    import httpx

    from lib.telegram.client import TelegramClient

    async def call() -> T:
        async with httpx.AsyncClient(timeout=httpx.Timeout(30.0, connect=10.0)) as http:
            return await action(TelegramClient(http, token, settings.secrets.telegram_api_base, retries=0))

    return asyncio.run(call())


async def _me_and_webhook(tg) -> tuple[dict, dict]:
    return await tg.get_me(), await tg.get_webhook_info()


def _webhook(
    settings: Settings, values: dict[str, str], current: str, webhook_url: str | None, fresh_secret: bool, ask: bool
) -> None:
    """Register the webhook when a URL is given (or its secret is new); with none, point at `ash relay`."""
    asked = webhook_url is not None
    if not asked and ask:
        webhook_url = click.prompt(
            "Public https URL Telegram delivers to (blank: none, then run `ash relay`)",
            default=current,
            show_default=bool(current),
            value_proc=checked_webhook_url,
        )
        asked = (webhook_url or "") != current
    target = webhook_url or current
    if not target:
        click.echo("webhook: none; with no public https URL, run `ash relay` beside `ash serve`")
    elif asked or fresh_secret:
        _bot(settings, values[TOKEN_NAME], lambda tg: tg.set_webhook(target, values[SECRET_NAME]))
        click.echo(f"webhook: {target} (registered with the secret in secrets.env)")
    else:
        click.echo(f"webhook: {target} (unchanged)")


def check_telegram(
    settings: Settings, path: Path, values: dict[str, str], webhook_url: str | None, fresh: bool, ask: bool
) -> bool:
    """Check the token with getMe, then the webhook; False when Telegram refused something or could
    not be reached. A refused token is asked for again (interactive), and the new one saved."""
    if not values.get(TOKEN_NAME):
        click.echo(f"bot: no {TOKEN_NAME} yet; get one from @BotFather, then run `ash init --token TOKEN`")
        return True
    while True:
        try:
            me, info = _bot(settings, values[TOKEN_NAME], _me_and_webhook)
        except InvalidToken as exc:
            click.echo(f"bot: Telegram refused the token ({exc.message})")
            if not ask:
                click.echo("     copy it again from @BotFather (/mybots, API Token), then run `ash init --token TOKEN`")
                return False
            answer = click.prompt(
                "The bot token from @BotFather (blank: stop)", default="", show_default=False, hide_input=True
            )
            if not answer.strip():
                return False
            values[TOKEN_NAME] = answer.strip()
            write_secrets(path, values)
            continue
        except (NetworkError, TimedOut) as exc:
            click.echo(
                f"bot: cannot reach Telegram at {settings.secrets.telegram_api_base} ({exc.message}); "
                "check this machine's network, then run `ash init` again"
            )
            return False
        except TelegramError as exc:
            click.echo(f"bot: Telegram answered: {exc.message}")
            return False
        break
    click.echo(f"bot: @{me.get('username')} (id {me.get('id')}), the token works")
    _webhook(settings, values, info.get("url") or "", webhook_url, fresh, ask)
    return True


def check_model_key(path: Path, values: dict[str, str], ask: bool) -> bool:
    """Ask the default model for one token with the saved key; a key the provider refused is asked
    for again (interactive), and the new one saved. False when it stays refused."""
    while True:
        settings = settings_or_exit()  # secrets.env as just written
        llm = settings.config.default_llm
        refused = _key_refused(settings, llm)
        if refused is None:
            return True
        name = PROVIDER_KEYS[llm.provider]
        click.echo(f"model: {llm.provider} refused {name} ({refused})")
        if not ask:
            click.echo("       set the right one with `ash init --key KEY`")
            return False
        answer = click.prompt(f"{name} (blank: stop)", default="", show_default=False, hide_input=True)
        if not answer.strip():
            return False
        values[name] = answer.strip()
        write_secrets(path, values)


def _key_refused(settings: Settings, llm) -> str | None:
    """Why the provider refused the key (401, 403), or None: it answered, or it could not be asked
    (no key, no network), which `ash doctor` reports in its own words."""
    from lib.commands.doctor_remote import check_model
    from lib.errors import LLMNotConfigured
    from lib.llm.router import candidates

    try:
        candidates(settings)
    except LLMNotConfigured:
        return None
    check = asyncio.run(check_model(settings, llm, "default model"))
    if check.status == "ok":
        click.echo(f"model: {check.detail}")
        return None
    return check.detail if (check.hint or "").startswith("the key was refused") else None
