"""How a person is named: a numeric Telegram user id, or an @username, as Telegram defines them.

One set of rules for the config file (`owner`, `[telegram] allowed_users`), `ash users allow`,
every `--user` option and the admin API, so "12345678O" (a letter O) or 0 is refused everywhere
alike instead of being accepted by one and refused by another.
"""

from __future__ import annotations

import re

from lib.errors import InvalidUserEntry

# The Bot API's promise about a user id: a positive number with "at most 52 significant bits".
USER_ID_MAX = 2**52 - 1
# Telegram usernames: 5 to 32 characters (4 for collectible ones bought on Fragment) of a-z, 0-9
# and underscores, starting with a letter and not ending with an underscore; case-insensitive.
USERNAME = re.compile(r"[a-z][a-z0-9_]{2,30}[a-z0-9]")


def parse_user_id(entry: str | int) -> str:
    """A numeric Telegram user id, normalised ("42"); InvalidUserEntry says what is wrong."""
    text = str(entry).strip()
    if text.isascii() and text.isdigit():
        if not 1 <= int(text) <= USER_ID_MAX:
            raise InvalidUserEntry(f"{text} is not a Telegram user id: ids are whole numbers from 1 to {USER_ID_MAX}")
        return str(int(text))
    if text.startswith("-") and text[1:].isdigit():
        raise InvalidUserEntry(f"{text} is a group or channel id; people have positive ids")
    raise InvalidUserEntry(f"{text!r} is not a Telegram user id (a whole number like 123456789)")


def parse_entry(entry: str | int) -> str:
    """A user id or @username someone typed, checked as Telegram defines them and normalised
    ("42", "@alice"); InvalidUserEntry says what is wrong."""
    text = str(entry).strip()
    if (text.isascii() and text.isdigit()) or (text.startswith("-") and text[1:].isdigit()):
        return parse_user_id(text)
    name = text.removeprefix("@").lower()
    if USERNAME.fullmatch(name):
        return "@" + name
    raise InvalidUserEntry(
        f"{text!r} is neither a numeric Telegram id (like 123456789) nor a username (4 to 32 letters, "
        "digits or underscores, starting with a letter, like @alice)"
    )
