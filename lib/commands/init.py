"""`ash init`: the first day in one command: config.toml, secrets.env, the owner, the bot, its webhook.

It asks for what it needs, or takes flags for scripts (`--yes` asks nothing). Run again, it
changes only what it is asked to: keys already in config.toml and secrets already in
secrets.env stay as they are unless a flag or an answer changes them. No secret is ever printed.
"""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import click

from lib.commands.common import open_db, settings_or_exit
from lib.commands.common import webhook_url as checked_webhook_url
from lib.commands.init_checks import PROVIDER_KEYS, SECRET_NAME, TOKEN_NAME, check_model_key, check_telegram
from lib.commands.init_files import environment, read_secrets, update_config, write_secrets
from lib.config import Config, Settings
from lib.config.environment import SECRETS_FILE
from lib.errors import InvalidUserEntry

PROVIDERS = ("anthropic", "openai")
DEFAULT_MODELS = {"anthropic": "claude-sonnet-4-6", "openai": "gpt-4o"}
# Names of environment variables, not values.
# Secrets Ash makes up itself: 32 random bytes in the alphabet Telegram allows a webhook secret.
GENERATED = (SECRET_NAME, "ASH_ADMIN_TOKEN")
# Where each provider's server is, when it is not the provider's own (Ollama, llama.cpp, vLLM ...).
BASE_URLS = {"anthropic": "ANTHROPIC_BASE_URL", "openai": "OPENAI_BASE_URL"}
# Endpoints taken from the environment into secrets.env, so the next shell reaches the same servers.
KEPT_ENDPOINTS = ("TELEGRAM_API_BASE", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "BRAVE_API_BASE")


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


def _model_name(text: str) -> str:
    """A model name (not blank)."""
    if not text.strip():
        raise click.BadParameter("give the model's name, e.g. gpt-4.1-mini or claude-sonnet-4-6")
    return text.strip()


def _checked(check: Callable[[str], object]):
    """A click option callback applying `check` to a given value."""
    return lambda _ctx, _param, value: value if value is None else check(value)


def _config_changes(
    config: Config, owner: int | None, provider: str | None, model: str | None, ask: bool, likely: str | None = None
) -> dict[tuple[str | None, str], str | int]:
    """The config keys to write: what the flags or answers change, nothing else (`likely`: the
    provider a setup without one would want, offered first)."""
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
        provider = click.prompt("Model provider", type=click.Choice(PROVIDERS), default=likely or llm.provider)
    provider = provider or likely or llm.provider
    suggested = llm.model if provider == llm.provider else DEFAULT_MODELS[provider]
    if model is None:
        model = click.prompt("Model", default=suggested, value_proc=_model_name) if ask else suggested
    if provider != llm.provider:
        changes[("default_llm", "provider")] = provider
    if model != llm.model:
        changes[("default_llm", "model")] = model
    return changes


def _take(values: dict[str, str], name: str, given: str | None, question: str, ask: bool) -> None:
    """Set a secret: from its flag, else from the environment (which wins, as everywhere), else
    the one secrets.env holds, else ask for it (hidden; blank leaves it out). A flag or the
    environment replaces a stored value: that is how a token Telegram refused is put right."""
    if given is not None and given.strip():
        values[name] = given.strip()
    elif os.environ.get(name, "").strip():
        values[name] = os.environ[name].strip()
    elif not values.get(name) and ask:
        answer = click.prompt(f"{question} (blank: later)", default="", show_default=False, hide_input=True)
        if answer.strip():
            values[name] = answer.strip()


def _base_url(values: dict[str, str], provider: str, given: str | None, ask: bool) -> None:
    """The provider's server when it is not the provider's own (`--base-url`, the environment,
    or asked for an OpenAI-compatible one), kept in secrets.env with the endpoints the environment
    names, so that a new shell reaches the same servers."""
    for name in KEPT_ENDPOINTS:
        if os.environ.get(name, "").strip():
            values[name] = os.environ[name].strip()
    variable = BASE_URLS[provider]
    if given is not None:
        values[variable] = given
    elif provider == "openai" and ask and not values.get(variable):
        answer = click.prompt(
            "OpenAI-compatible server, e.g. http://127.0.0.1:11434/v1 for Ollama (blank: OpenAI itself)",
            default="",
            show_default=False,
            value_proc=lambda text: _http_url(text) if text.strip() else "",
        )
        if answer:
            values[variable] = answer


def _http_url(text: str) -> str:
    """An http(s) URL, else a message saying what is expected."""
    url = text.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise click.BadParameter(f"expected an http(s) URL such as http://127.0.0.1:11434/v1, got {text!r}")
    return url


def _likely_provider(config: Config, values: dict[str, str]) -> str | None:
    """For a setup with no provider written yet, the one whose key or server there is: an OpenAI
    key alone must not leave Ash asking Anthropic, which has no key (Fly's first `ash init`)."""
    if (
        config.default_llm.provider != "anthropic"
        or values.get("ANTHROPIC_API_KEY")
        or os.environ.get("ANTHROPIC_API_KEY", "").strip()
    ):
        return None
    openai = ("OPENAI_API_KEY", "OPENAI_BASE_URL")
    return "openai" if any(values.get(n) or os.environ.get(n, "").strip() for n in openai) else None


def _save_secrets(path: Path, stored: dict[str, str], values: dict[str, str]) -> None:
    """Complete `values` with the secrets Ash makes up, and write them when anything changed."""
    for name in GENERATED:
        _take(values, name, None, "", ask=False)
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


def _verdict(values: dict[str, str]) -> None:
    """`ash doctor`'s checks, as every command now reads them (secrets.env included)."""
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


def _ash_command() -> str:
    """How the person runs `ash` from here: `ash` when that is on PATH, else the path they used."""
    running = Path(sys.argv[0]).resolve()
    found = shutil.which("ash")
    return "ash" if found and Path(found).resolve() == running else _shown(running)


def _remote_init(config: Config) -> str:
    """The `ash init` that writes this configuration on another machine (Fly's volume)."""
    llm = config.default_llm
    owner = f" --owner {config.owner}" if config.owner is not None else ""
    return f"ash init --yes{owner} --provider {llm.provider} --model {shlex.quote(llm.model)}"


def _summary(settings: Settings, config: Config, changes: dict, path: Path, stored: dict, values: dict) -> None:
    """What init did to the files, in a few lines."""
    if changes:
        click.echo(f"config: {settings.config_path} (set {', '.join(k for _, k in changes)})")
    elif settings.config_file_found:
        click.echo(f"config: {settings.config_path} (unchanged)")
    else:
        click.echo(f"config: none written (the defaults: {config.default_llm.provider} {config.default_llm.model})")
    if config.owner is not None:
        click.echo(f"owner: {config.owner}, always allowed")
    else:
        click.echo("owner: not set; run `ash init --owner ID` (write to the bot: it answers strangers with their id)")
    new = [name for name in values if values[name] != stored.get(name)]
    click.echo(
        f"secrets: {_shown(path)} (0600) holds {', '.join(values)}" + (f"; new: {', '.join(new)}" if new else "")
    )


# init's flags, apart from the function so it stays short.
OPTIONS = (
    click.option(
        "--owner",
        default=None,
        callback=_checked(_owner_id),
        help="Your numeric Telegram id (ask @userinfobot); always allowed.",
    ),
    click.option(
        "--webhook-url",
        default=None,
        callback=_checked(checked_webhook_url),
        help="The public https URL Telegram delivers to (.../telegram/webhook). "
        "None? Leave it out and run `ash relay`.",
    ),
    click.option("--provider", type=click.Choice(PROVIDERS), default=None, help="The model provider that answers."),
    click.option(
        "--model",
        default=None,
        callback=_checked(_model_name),
        help="The model that answers (default: the provider's usual one).",
    ),
    click.option(
        "--token",
        default=None,
        help="The bot token from @BotFather; replaces the saved one (one Telegram refused, say).",
    ),
    click.option("--key", default=None, help="The model provider's API key; replaces the saved one."),
    click.option(
        "--base-url",
        default=None,
        callback=_checked(_http_url),
        help="An OpenAI-compatible server (Ollama, llama.cpp, vLLM), e.g. http://127.0.0.1:11434/v1; saved as "
        "OPENAI_BASE_URL (ANTHROPIC_BASE_URL with --provider anthropic).",
    ),
    click.option(
        "--yes", "-y", is_flag=True, help="Ask nothing: apply the flags, keep the rest, make missing secrets."
    ),
)


def _with_options(command: Callable) -> Callable:
    for option in reversed(OPTIONS):
        command = option(command)
    return command


@click.command()
@_with_options
def init(
    owner: int | None,
    webhook_url: str | None,
    provider: str | None,
    model: str | None,
    token: str | None,
    key: str | None,
    base_url: str | None,
    yes: bool,
) -> None:
    """Set Ash up, or change its setup: config.toml, secrets.env, the owner, the bot and its webhook.

    Writes config.toml (owner, model), $ASH_HOME/secrets.env (0600: the bot token, the model key,
    the server of an OpenAI-compatible model, and TELEGRAM_WEBHOOK_SECRET and ASH_ADMIN_TOKEN,
    which it makes), migrates the database, checks the token with Telegram and the key with the
    provider (asking again for one they refuse), registers the webhook, and ends with `ash doctor`'s
    verdict. Every `ash` command and the server read secrets.env themselves; the environment wins.
    Run again, it changes only what you ask."""
    ask = not yes
    settings = settings_or_exit()
    path = settings.home / SECRETS_FILE
    stored = read_secrets(path)
    values = dict(stored)
    _take(values, TOKEN_NAME, token, "Bot token from @BotFather", ask)
    likely = _likely_provider(settings.config, values) if key is None and base_url is None else None
    changes = _config_changes(settings.config, owner, provider, model, ask, likely)
    config = update_config(settings.config_path, changes) if changes else settings.config
    chosen = config.default_llm.provider
    _base_url(values, chosen, base_url, ask)
    _take(values, PROVIDER_KEYS[chosen], key, PROVIDER_KEYS[chosen], ask)
    _save_secrets(path, stored, values)
    _summary(settings, config, changes, path, stored, values)
    open_db(settings, create=True).close()
    click.echo(f"database: {settings.database_path} (migrated)")
    telegram_ok = check_telegram(settings, path, values, webhook_url, SECRET_NAME not in stored, ask)
    model_ok = check_model_key(path, values, ask)
    _verdict(values)
    click.echo(f"\nnext: {_ash_command()} serve   (it reads {_shown(path)} itself)")
    remote = shlex.quote(_remote_init(config))
    click.echo(f"Fly.io: fly secrets import < {_shown(path)} && fly deploy, then fly ssh console -C {remote}")
    if not (telegram_ok and model_ok):
        raise SystemExit(1)
