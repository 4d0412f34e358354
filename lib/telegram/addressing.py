"""Whether a group message is meant for the bot: a mention, a reply to it, or one of its commands."""

from __future__ import annotations

import re

from lib.conversation.commands import COMMANDS
from lib.telegram.types import Message


def _utf16_slice(text: str, offset: int, length: int) -> str:
    # Entity offsets count UTF-16 code units (https://core.telegram.org/api/entities).
    data = text.encode("utf-16-le")
    return data[offset * 2 : (offset + length) * 2].decode("utf-16-le", errors="ignore")


def addressed_in_group(message: Message, text: str, me: dict) -> tuple[bool, str]:
    """(whether the bot was mentioned or replied to, the text without the mention)."""
    username = (me.get("username") or "").lower()
    bot_id = me.get("id")
    hit = False
    for entity in message.entities or message.caption_entities:
        piece = _utf16_slice(text, entity.offset, entity.length)
        mentioned = entity.type == "mention" and bool(username) and piece.lower() == "@" + username
        named = entity.type == "text_mention" and entity.user is not None and entity.user.id == bot_id
        if mentioned or named:
            hit = True
        elif entity.type == "bot_command" and entity.offset == 0:
            name, _, target = piece[1:].partition("@")
            if (target and target.lower() == username) or (not target and name.lower() in COMMANDS):
                hit = True
    reply_to = message.reply_to_message
    if reply_to is not None and reply_to.from_ is not None and bot_id is not None and reply_to.from_.id == bot_id:
        hit = True
    if username:
        text = re.sub(rf"@{re.escape(username)}\b", "", text, flags=re.IGNORECASE).strip()
    return hit, text
