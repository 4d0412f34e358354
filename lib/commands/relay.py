"""`ash relay [--url URL]`: Telegram updates for a server with no public https URL."""

from __future__ import annotations

import asyncio

import click

from lib.commands import relay_state
from lib.commands.common import settings_or_exit
from lib.config import Settings
from lib.errors import InvalidToken, RelayStopped, TelegramError


async def _relay(settings: Settings, url: str) -> None:
    import httpx

    from lib.telegram.client import TelegramClient
    from lib.telegram.relay import Relay

    token, secret = settings.secrets.telegram_bot_token, settings.secrets.telegram_webhook_secret
    async with httpx.AsyncClient(timeout=httpx.Timeout(30.0, connect=10.0)) as http:
        # getMe first: a wrong token fails here, in one clear line, rather than in the poll loop. The
        # client also hides the token in httpx's log lines, which the relay's getUpdates URLs carry.
        me = await TelegramClient(http, token, settings.secrets.telegram_api_base, retries=1).get_me()
        click.echo(f"relaying updates of @{me.get('username')} to {url} (Ctrl-C stops)", err=True)
        bot = me.get("username")
        relay = Relay(http, token, settings.secrets.telegram_api_base, url, secret)
        relay.on_poll = lambda: relay_state.beat(settings.home, url=url, bot=bot)
        await relay.run()


@click.command()
@click.option(
    "--url",
    default=None,
    help="The webhook to deliver to (default: this machine's `ash serve`, http://127.0.0.1:PORT/telegram/webhook).",
)
def relay(url: str | None) -> None:
    """Poll Telegram and deliver each update to the webhook, for a server with no public URL.

    Run it beside `ash serve` (a laptop, a Raspberry Pi behind NAT). The server stays
    webhook-only: each update is POSTed with TELEGRAM_WEBHOOK_SECRET, retried while the server
    is down, and stored once however often it arrives. Telegram keeps updates for a poller only
    while no webhook is registered (`ash webhook delete`)."""
    from lib.telegram.relay import default_webhook_url

    settings = settings_or_exit()
    if not settings.secrets.telegram_bot_token:
        raise click.ClickException("TELEGRAM_BOT_TOKEN is not set: load $ASH_HOME/secrets.env (`ash init` writes it)")
    if not settings.secrets.telegram_webhook_secret:
        raise click.ClickException(
            "TELEGRAM_WEBHOOK_SECRET is not set, and the server refuses updates without it: load the same "
            "$ASH_HOME/secrets.env as `ash serve` (`ash init` writes it)"
        )
    server = settings.config.server
    url = url or default_webhook_url(server.host, server.port)
    if not url.startswith(("http://", "https://")):
        raise click.ClickException(f"--url must be an http(s) URL, got {url!r}")
    try:
        asyncio.run(_relay(settings, url))
    except InvalidToken as exc:
        raise click.ClickException(
            f"Telegram refused TELEGRAM_BOT_TOKEN ({exc.message}): copy it again from @BotFather"
        ) from None
    except TelegramError as exc:
        raise click.ClickException(f"Telegram did not answer getMe ({exc.message}); check the network") from None
    except RelayStopped as exc:
        raise click.ClickException(f"relay stopped: {exc}") from None
    except KeyboardInterrupt:
        click.echo("relay stopped", err=True)
