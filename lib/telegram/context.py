"""What a message refers to, put before its text for the model: the message it replies to (or
the part of it the reply quotes), and who a forward came from.

It is written as labelled data, one bracketed line each, for example

    [Forwarded from the channel Daily News]
    [In reply to Bob: "are we still on for friday?"]
    [In reply to your message, quoting: "the second option"]

It is what the person saw on their screen and is stored with their message: untrusted content,
never an instruction. Names are cleaned as the group transcript cleans its speakers
(lib/agent/prompt.py speaker_name: no brackets or line breaks, at most 64 characters), and
quoted text is a JSON string cut to QUOTE_LIMIT characters, so nothing inside it can end the
bracket and pose as Ash's own words.
"""

from __future__ import annotations

import json

from lib.agent import TurnInput, speaker_name
from lib.telegram.kinds import RECORDING_NOUNS, message_content
from lib.telegram.types import Chat, Message, MessageOrigin, User

# Characters of replied-to or quoted text shown: enough to know what is meant, not a copy.
QUOTE_LIMIT = 300


def display_name(user: User) -> str:
    """First and last name as Telegram shows them ("" when neither is set)."""
    return " ".join(part for part in (user.first_name, user.last_name) if part)


def with_context(message: Message, text: str, bot_id: int) -> str:
    """`text` behind what `message` forwards or replies to; just `text` when it does neither."""
    lines = [line for line in (_forwarded(message), _replied(message, bot_id)) if line]
    return "\n".join([*lines, text] if text else lines)


def outside_content(message: Message, bot_id: int) -> tuple[str, ...]:
    """What in `message` someone else wrote, named for the approval step (lib/agent/approval.py):
    a forward, or the message it replies to or quotes when that is not the sender's or Ash's."""
    found = []
    if message.forward_origin is not None:
        found.append(f"a forwarded {RECORDING_NOUNS.get(message_content(message), 'message')}")
    reply, external = message.reply_to_message, message.external_reply
    if reply is not None and not _opens_the_topic(message, reply):
        own = reply.from_ is not None and message.from_ is not None and reply.from_.id == message.from_.id
        if not own and not _written_by_the_bot(message, reply, bot_id):
            found.append(f"a message from {_sender_name(reply)}")
    elif external is not None:
        found.append("a message quoted from another chat")
    return tuple(found)


def _forwarded(message: Message) -> str | None:
    if message.forward_origin is None:
        return None
    return f"[Forwarded from {_origin_name(message.forward_origin)}]"


def _replied(message: Message, bot_id: int) -> str | None:
    quote = message.quote.text if message.quote is not None and message.quote.text else None
    reply, external = message.reply_to_message, message.external_reply
    if reply is not None and not _opens_the_topic(message, reply):
        who = "your message" if _written_by_the_bot(message, reply, bot_id) else _sender_name(reply)
        what = _quoted(quote) if quote else _describe(reply)
    elif external is not None:
        who = _origin_name(external.origin) if external.origin is not None else "a message"
        if external.chat is not None:
            who += f" in {_chat_name(external.chat)}"
        what = _quoted(quote) if quote else "(a message in another chat)"
    else:
        return None
    return f"[In reply to {who}, quoting: {what}]" if quote else f"[In reply to {who}: {what}]"


def _written_by_the_bot(message: Message, reply: Message, bot_id: int) -> bool:
    # In a private chat with the bot, the bot is the only bot there is.
    author = reply.from_
    if author is None:
        return False
    return author.id == bot_id or (message.chat.type == "private" and author.is_bot)


def _opens_the_topic(message: Message, reply: Message) -> bool:
    # Every message in a forum topic replies to the topic's first message, unless its sender
    # picked one: that is where it was written, not what it answers.
    return message.is_topic_message and reply.message_id == message.message_thread_id


def _describe(message: Message) -> str:
    text = message.text or message.caption
    if text:
        return _quoted(text)
    content = message_content(message)
    return f"({content.replace('_', ' ')})" if content else "(a message)"


def _quoted(text: str) -> str:
    if len(text) > QUOTE_LIMIT:
        cut = text[:QUOTE_LIMIT]
        space = cut.rfind(" ")
        text = (cut[:space] if space > QUOTE_LIMIT * 2 // 3 else cut) + "…"
    return json.dumps(text, ensure_ascii=False)


def _sender_name(message: Message) -> str:
    # An anonymous admin or a channel writes as a chat; `from` then holds a placeholder bot.
    if message.sender_chat is not None:
        return _chat_name(message.sender_chat)
    if message.from_ is not None:
        return _person(message.from_)
    return "someone"


def _origin_name(origin: MessageOrigin) -> str:
    if origin.type == "user" and origin.sender_user is not None:
        name = _person(origin.sender_user)
    elif origin.type == "hidden_user" and origin.sender_user_name:
        name = f"{_clean(origin.sender_user_name)} (hidden account)"
    elif origin.type == "chat" and origin.sender_chat is not None:
        name = _chat_name(origin.sender_chat)
    elif origin.type == "channel" and origin.chat is not None:
        name = f"the channel {_chat_name(origin.chat)}"
    else:
        return "an unknown sender"
    if origin.author_signature:
        name += f" (signed {_clean(origin.author_signature)})"
    return name


def _person(user: User) -> str:
    return _label(str(user.id), display_name(user) or None, user.username)


def _chat_name(chat: Chat) -> str:
    return _label(str(chat.id), chat.title, chat.username)


def _clean(name: str) -> str:
    return _label("unknown", name, None)


def _label(fallback_id: str, name: str | None, username: str | None) -> str:
    """A name as the group transcript writes it (speaker_name's rules, one place)."""
    return speaker_name(
        TurnInput(provider="telegram", chat_id="", user_id=fallback_id, text="", username=username, display_name=name)
    )
