"""Whose memory a chat reads and writes: privacy by chat.

Every message and knowledge entry has one owner, and a turn only ever reads its own chat's
owner (plus entries the operator marked global):

- a private chat (and `ash chat`) is the person's own memory: owner = their user id;
- a group is the group's memory: owner = "chat:<chat id>". Everyone in the group said it in
  front of everyone else, so the group may see it; nobody's private chat may.

So a group turn never sees anyone's private messages, facts or profile notes, and a private
chat never sees what a group said. Telegram user ids are numbers, so "chat:..." cannot collide
with one.
"""

from __future__ import annotations

GROUP_CHAT_TYPES = frozenset({"group", "supergroup", "channel"})
GROUP_PREFIX = "chat:"


def is_group(chat_type: str) -> bool:
    """True for chats shared by several people."""
    return chat_type in GROUP_CHAT_TYPES


def memory_owner(chat_type: str, chat_id: str, user_id: str) -> str:
    """The owner of what is said and saved in this chat (see the module docstring)."""
    return f"{GROUP_PREFIX}{chat_id}" if is_group(chat_type) else user_id


def is_group_owner(owner: str | None) -> bool:
    """True when an owner is a group's memory rather than a person's."""
    return bool(owner) and owner.startswith(GROUP_PREFIX)
