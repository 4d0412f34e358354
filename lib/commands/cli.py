"""The `ash` command: one click group, one module per area under `lib/commands/`.

A command's module is imported only when that command runs (or help lists them all), so
`ash serve` starts without loading every other command; modules import heavy packages (LLM
SDKs, docker) inside their functions for the same reason.
"""

from __future__ import annotations

import importlib
import logging

import click

# command name -> (module under lib/commands, attribute), in the order help lists them.
COMMANDS = {
    "init": ("init", "init"),
    "serve": ("serve", "serve"),
    "relay": ("relay", "relay"),
    "chat": ("chat", "chat"),
    "doctor": ("doctor", "doctor"),
    "db": ("db", "db"),
    "users": ("users", "users"),
    "memory": ("memory", "memory"),
    "sessions": ("sessions", "sessions"),
    "usage": ("usage", "usage"),
    "schedule": ("schedule", "schedule"),
    "mcp": ("mcp", "mcp"),
    "webhook": ("webhook", "webhook"),
    "sandbox": ("sandbox", "sandbox"),
    "backup": ("backup", "backup"),
    "restore": ("backup", "restore"),
    "replica": ("replica", "replica"),
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, attribute = COMMANDS[name]
        return getattr(importlib.import_module(f"lib.commands.{module}"), attribute)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="ash", prog_name="ash")
@click.option("-v", "--verbose", is_flag=True, help="Log debug details to stderr.")
def cli(verbose: bool) -> None:
    """Ash, a personal assistant for Telegram that remembers.

    Configuration comes from $ASH_CONFIG (default $ASH_HOME/config.toml; ASH_HOME defaults to the
    checkout's data/), secrets from the environment and $ASH_HOME/secrets.env. Start with `ash doctor`.
    """
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="ash")
