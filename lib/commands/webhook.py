"""`ash webhook set URL|delete|info`: register the webhook with Telegram."""

from __future__ import annotations

import asyncio
import json

import click

from lib.commands.common import settings_or_exit, webhook_url
from lib.config import Settings
from lib.errors import TelegramError


def _run(settings: Settings, action):
    """Run one Bot API call with a short-lived client; Telegram errors become a clear message."""
    import httpx

    from lib.telegram.client import TelegramClient

    token = settings.secrets.telegram_bot_token
    if not token:
        raise click.ClickException("TELEGRAM_BOT_TOKEN is not set; get a token from @BotFather and export it")

    async def call():
        async with httpx.AsyncClient(timeout=httpx.Timeout(30.0, connect=10.0)) as http:
            return await action(TelegramClient(http, token, settings.secrets.telegram_api_base))

    try:
        return asyncio.run(call())
    except TelegramError as exc:
        raise click.ClickException(f"Telegram refused: {exc.message}") from None


@click.group()
def webhook() -> None:
    """Register, remove or inspect the Telegram webhook."""


@webhook.command("set")
@click.argument("url", callback=lambda _ctx, _param, value: webhook_url(value))
@click.option("--drop-pending", is_flag=True, help="Discard updates Telegram has queued for the bot.")
def webhook_set(url: str, drop_pending: bool) -> None:
    """Point Telegram at URL with the secret, and set the bot's command menu.

    URL is the public https URL of the webhook; a bare origin (https://ash.example.com) gets
    /telegram/webhook appended, as `ash init` does."""
    from lib.telegram.client import ALLOWED_UPDATES
    from lib.telegram.menu import set_command_menu

    settings = settings_or_exit()
    secret = settings.secrets.telegram_webhook_secret
    if not secret:
        raise click.ClickException(
            "TELEGRAM_WEBHOOK_SECRET is not set; the server refuses every update without it. "
            "Set it (e.g. `openssl rand -hex 32`) here and on the server, then run this again"
        )
    _run(settings, lambda tg: tg.set_webhook(url, secret, drop_pending_updates=drop_pending))
    click.echo(f"webhook set: {url} (updates: {', '.join(ALLOWED_UPDATES)})")
    commands = _run(settings, set_command_menu)
    click.echo(f"command menu set: /{', /'.join(commands)}")


@webhook.command("delete")
@click.option("--drop-pending", is_flag=True, help="Discard updates Telegram has queued for the bot.")
def webhook_delete(drop_pending: bool) -> None:
    """Remove the webhook (Telegram stops delivering updates)."""
    settings = settings_or_exit()
    _run(settings, lambda tg: tg.delete_webhook(drop_pending_updates=drop_pending))
    click.echo("webhook deleted")


@webhook.command("info")
@click.option("--json", "as_json", is_flag=True, help="Print Telegram's answer as JSON.")
def webhook_info(as_json: bool) -> None:
    """Show the webhook Telegram has on record, pending updates and the last delivery error."""
    settings = settings_or_exit()
    info = _run(settings, lambda tg: tg.get_webhook_info())
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    click.echo(f"url: {info.get('url') or '(none)'}")
    click.echo(f"pending updates: {info.get('pending_update_count', 0)}")
    if info.get("allowed_updates"):
        click.echo(f"allowed updates: {', '.join(info['allowed_updates'])}")
    if info.get("last_error_message"):
        click.echo(f"last error: {info['last_error_message']} (at {info.get('last_error_date')})")
