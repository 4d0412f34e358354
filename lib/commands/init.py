"""`ash init`: the first day in one command: config.toml, secrets.env, the owner, the bot, its webhook.

It asks for what it needs, or takes flags for scripts (`--yes` asks nothing). Run again, it
changes only what it is asked to: keys already in config.toml and secrets already in
secrets.env stay as they are unless a flag or an answer changes them. No secret is ever printed.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shlex
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import click

from lib.commands.common import open_db, settings_or_exit
from lib.commands.common import webhook_url as checked_webhook_url
from lib.commands.init_files import environment, read_secrets, update_config, write_secrets
from lib.config import Config, Settings
from lib.errors import InvalidToken, InvalidUserEntry, TelegramError

PROVIDERS = ("anthropic", "openai")
DEFAULT_MODELS = {"anthropic": "claude-sonnet-4-6", "openai": "gpt-4o"}
PROVIDER_KEYS = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
# Names of environment variables, not values.
TOKEN_NAME = "TELEGRAM_BOT_TOKEN"  # noqa: S105
SECRET_NAME = "TELEGRAM_WEBHOOK_SECRET"  # noqa: S105
# Secrets Ash makes up itself: 32 random bytes in the alphabet Telegram allows a webhook secret.
GENERATED = (SECRET_NAME, "ASH_ADMIN_TOKEN")


def _owner_id(text: str) -> int | None:
    """A numeric Telegram id (blank: none), else a message saying why not."""
    from lib.config.people import parse_entry

    if not text.strip():
        return None
    try:
        entry = parse_entry(text)
    except InvalidUserEntry as exc:
        raise click.BadParameter(str(exc)) from None
    if entry.startswith("@"):
        raise click.BadParameter("the owner is given by numeric id (a username can change hands)")
    return int(entry)


def _checked(check: Callable[[str], object]):
    """A click option callback applying `check` to a given value."""
    return lambda _ctx, _param, value: value if value is None else check(value)


def _config_changes(
    config: Config, owner: int | None, provider: str | None, model: str | None, ask: bool
) -> dict[tuple[str | None, str], str | int]:
    """The config keys to write: what the flags or answers change, nothing else."""
    changes: dict[tuple[str | None, str], str | int] = {}
    current = "" if config.owner is None else str(config.owner)
    if owner is None and ask:
        owner = click.prompt(
            "Your numeric Telegram id, the owner (ask @userinfobot; blank: later)",
            default=current,
            show_default=bool(current),
            value_proc=_owner_id,
        )
    if owner is not None and owner != config.owner:
        changes[(None, "owner")] = owner
    llm = config.default_llm
    if provider is None and ask:
        provider = click.prompt("Model provider", type=click.Choice(PROVIDERS), default=llm.provider)
    provider = provider or llm.provider
    suggested = llm.model if provider == llm.provider else DEFAULT_MODELS[provider]
    if model is None:
        model = click.prompt("Model", default=suggested) if ask else suggested
    if provider != llm.provider:
        changes[("default_llm", "provider")] = provider
    if model != llm.model:
        changes[("default_llm", "model")] = model
    return changes


def _fill(values: dict[str, str], name: str, question: str, ask: bool) -> None:
    """Take a missing secret from the environment, else ask for it (hidden; blank leaves it out)."""
    if values.get(name):
        return
    if os.environ.get(name, "").strip():
        values[name] = os.environ[name].strip()
    elif ask:
        answer = click.prompt(f"{question} (blank: later)", default="", show_default=False, hide_input=True)
        if answer.strip():
            values[name] = answer.strip()


def _save_secrets(path: Path, stored: dict[str, str], values: dict[str, str], model_key: str, ask: bool) -> None:
    """Complete `values` (the model's key, generated secrets) and write them when they changed."""
    _fill(values, model_key, model_key, ask)
    for name in GENERATED:
        _fill(values, name, "", ask=False)
        values.setdefault(name, secrets.token_urlsafe(32))
    if values != stored:
        write_secrets(path, values)
    os.chmod(path, 0o600)  # an older file may have been created with looser permissions


def _shown(path: Path) -> str:
    """A path as the user would type it here: relative to the working directory when inside it."""
    try:
        return shlex.quote(str(path.relative_to(Path.cwd())))
    except ValueError:
        return shlex.quote(str(path))


def _bot[T](settings: Settings, token: str, action: Callable[[Any], Awaitable[T]]) -> T:
    """One Bot API exchange with a short-lived client."""
    import httpx

    from lib.telegram.client import TelegramClient

    async def call() -> T:
        async with httpx.AsyncClient(timeout=httpx.Timeout(30.0, connect=10.0)) as http:
            return await action(TelegramClient(http, token, settings.secrets.telegram_api_base, retries=1))

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


def _telegram(
    settings: Settings, values: dict[str, str], webhook_url: str | None, fresh_secret: bool, ask: bool
) -> bool:
    """Check the token with getMe, then the webhook; False when Telegram refused something."""
    if not values.get(TOKEN_NAME):
        click.echo(f"bot: no {TOKEN_NAME} yet; get one from @BotFather, then run `ash init` again")
        return True
    try:
        me, info = _bot(settings, values[TOKEN_NAME], _me_and_webhook)
        click.echo(f"bot: @{me.get('username')} (id {me.get('id')}), the token works")
        _webhook(settings, values, info.get("url") or "", webhook_url, fresh_secret, ask)
    except InvalidToken as exc:
        click.echo(f"bot: Telegram refused the token ({exc.message}); copy it again from @BotFather into secrets.env")
        return False
    except TelegramError as exc:
        click.echo(f"bot: Telegram answered: {exc.message}")
        return False
    return True


def _verdict(values: dict[str, str]) -> None:
    """`ash doctor`'s checks, as they will read once secrets.env is loaded."""
    from lib.commands.doctor import MARKS
    from lib.commands.doctor_checks import run_checks

    with environment(values):
        results = run_checks()
    click.echo("\nash doctor:")
    for check in results:
        hint = f"\n       -> {check.hint}" if check.hint and check.status != "ok" else ""
        click.echo(f"{MARKS[check.status]} {check.name}: {check.detail}{hint}")
    failed = sum(check.status == "fail" for check in results)
    click.echo(
        "verdict: ready" if not failed else f"verdict: {failed} check(s) failed; fix them, then run `ash doctor`"
    )


@click.command()
@click.option(
    "--owner",
    default=None,
    callback=_checked(_owner_id),
    help="Your numeric Telegram id (ask @userinfobot); always allowed.",
)
@click.option(
    "--webhook-url",
    default=None,
    callback=_checked(checked_webhook_url),
    help="The public https URL Telegram delivers to (.../telegram/webhook). None? Leave it out and run `ash relay`.",
)
@click.option("--provider", type=click.Choice(PROVIDERS), default=None, help="The model provider that answers.")
@click.option("--model", default=None, help="The model that answers (default: the provider's usual one).")
@click.option("--yes", "-y", is_flag=True, help="Ask nothing: apply the flags, keep the rest, make missing secrets.")
def init(owner: int | None, webhook_url: str | None, provider: str | None, model: str | None, yes: bool) -> None:
    """Set Ash up, or change its setup: config.toml, secrets.env, the owner, the bot and its webhook.

    Writes config.toml (owner, model), generates TELEGRAM_WEBHOOK_SECRET and ASH_ADMIN_TOKEN into
    $ASH_HOME/secrets.env (0600, with the bot token and the model key you give), migrates the
    database, checks the token with Telegram, registers the webhook, and ends with `ash doctor`'s
    verdict. Run again, it changes only what you ask."""
    ask = not yes
    settings = settings_or_exit()
    secrets_path = settings.home / "secrets.env"
    stored = read_secrets(secrets_path)
    values = dict(stored)
    _fill(values, TOKEN_NAME, "Bot token from @BotFather", ask)
    changes = _config_changes(settings.config, owner, provider, model, ask)
    config = update_config(settings.config_path, changes) if changes else settings.config
    _save_secrets(secrets_path, stored, values, PROVIDER_KEYS[config.default_llm.provider], ask)

    click.echo(
        f"config: {settings.config_path}"
        + (f" (set {', '.join(k for _, k in changes)})" if changes else " (unchanged)")
    )
    if config.owner is not None:
        click.echo(f"owner: {config.owner}, always allowed")
    else:
        click.echo("owner: not set; run `ash init --owner ID` (write to the bot: it answers strangers with their id)")
    new = [name for name in values if values[name] != stored.get(name)]
    click.echo(
        f"secrets: {_shown(secrets_path)} (0600) holds {', '.join(values)}"
        + (f"; new: {', '.join(new)}" if new else "")
    )
    open_db(settings, create=True).close()
    click.echo(f"database: {settings.database_path} (migrated)")
    telegram_ok = _telegram(settings, values, webhook_url, SECRET_NAME not in stored, ask)
    _verdict(values)

    loader = f"set -a; . {_shown(secrets_path)}; set +a"
    click.echo(f"\nnext: {loader} && ash serve")
    references = " ".join(f'{name}="${name}"' for name in values)
    click.echo(f"Fly.io, after loading it: fly secrets set {references}")
    if not telegram_ok:
        raise SystemExit(1)
