"""Telegram's command menu (the "/" button), kept equal to the command registry.

`ash webhook set` sets it; the server sets it at start-up only when it differs from what Telegram
has (one getMyCommands read per start), so a new command in lib/conversation/commands.py REGISTRY
appears in the menu by itself after a deploy.
"""

from __future__ import annotations

import logging

import msgspec

from lib.conversation.commands import REGISTRY
from lib.errors import TelegramError
from lib.telegram.client import TelegramClient
from lib.telegram.types import BotCommand

log = logging.getLogger("ash.telegram")


def menu() -> list[BotCommand]:
    """The command menu Telegram should show (setMyCommands), from the registry."""
    return [BotCommand(command=c.name, description=c.description) for c in REGISTRY if c.listed]


async def set_command_menu(client: TelegramClient) -> list[str]:
    """setMyCommands from the registry; returns the command names now in the menu."""
    commands = menu()
    await client.set_my_commands(commands)
    return [command.command for command in commands]


async def sync_command_menu(client: TelegramClient) -> bool:
    """Set the menu when Telegram's differs from the registry; True when it was set.
    A failure is logged: the menu is a convenience, never a reason not to serve."""
    try:
        if await client.get_my_commands() == menu():
            return False
        names = await set_command_menu(client)
    except (TelegramError, msgspec.ValidationError) as exc:
        log.warning("could not update the Telegram command menu: %s", exc)
        return False
    log.info("Telegram command menu set: /%s", ", /".join(names))
    return True
