"""The `ash` command: one click group, one module per area under `lib/commands/`.

Command modules import heavy packages (LLM SDKs, docker) inside their functions, so
`ash --help` stays fast.
"""

from __future__ import annotations

import logging

import click

from lib.commands import backup, chat, db, doctor, memory, sandbox, serve, sessions, usage, users, webhook


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="ash", prog_name="ash")
@click.option("-v", "--verbose", is_flag=True, help="Log debug details to stderr.")
def cli(verbose: bool) -> None:
    """Ash, a personal assistant for Telegram that remembers.

    Configuration comes from $ASH_CONFIG (default $ASH_HOME/config.toml, ASH_HOME=./data)
    and secrets from the environment. Start with `ash doctor`.
    """
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )


for module in (serve, db, doctor, chat, usage, users, webhook, sandbox, memory, sessions, backup):
    module.register(cli)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="ash")
