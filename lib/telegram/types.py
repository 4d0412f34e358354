"""Bot API objects as msgspec Structs: only the fields Ash reads, unknown fields accepted.

Every optional field has a default so a new Bot API field, or an old payload missing one,
never breaks decoding. Decoders are built once at module level.
"""

from __future__ import annotations

import msgspec


class User(msgspec.Struct, kw_only=True):
    id: int
    # Old payloads (the Bot API docs' own webhook examples) omit is_bot.
    is_bot: bool = False
    first_name: str = ""
    last_name: str | None = None
    username: str | None = None
    language_code: str | None = None


class Chat(msgspec.Struct, kw_only=True):
    id: int
    type: str = "private"
    title: str | None = None
    username: str | None = None
    first_name: str | None = None
    last_name: str | None = None


class MessageEntity(msgspec.Struct, kw_only=True):
    type: str
    offset: int
    length: int
    url: str | None = None
    user: User | None = None
    language: str | None = None


class PhotoSize(msgspec.Struct, kw_only=True):
    file_id: str
    file_unique_id: str = ""
    width: int = 0
    height: int = 0
    file_size: int | None = None


class Voice(msgspec.Struct, kw_only=True):
    file_id: str
    duration: int = 0
    mime_type: str | None = None
    file_size: int | None = None


class Document(msgspec.Struct, kw_only=True):
    file_id: str
    file_name: str | None = None
    mime_type: str | None = None
    file_size: int | None = None


class MessageOrigin(msgspec.Struct, kw_only=True):
    """forward_origin: user, hidden_user, chat or channel; only the type and sender are read."""

    type: str
    date: int = 0
    sender_user: User | None = None
    sender_user_name: str | None = None
    sender_chat: Chat | None = None
    chat: Chat | None = None


class Message(msgspec.Struct, kw_only=True):
    message_id: int
    date: int = 0
    chat: Chat
    from_: User | None = msgspec.field(default=None, name="from")
    sender_chat: Chat | None = None
    message_thread_id: int | None = None
    text: str | None = None
    caption: str | None = None
    entities: list[MessageEntity] = msgspec.field(default_factory=list)
    caption_entities: list[MessageEntity] = msgspec.field(default_factory=list)
    photo: list[PhotoSize] = msgspec.field(default_factory=list)
    voice: Voice | None = None
    audio: dict | None = None
    video: dict | None = None
    video_note: dict | None = None
    sticker: dict | None = None
    document: Document | None = None
    media_group_id: str | None = None
    forward_origin: MessageOrigin | None = None
    reply_to_message: Message | None = None


class CallbackQuery(msgspec.Struct, kw_only=True):
    id: str
    from_: User = msgspec.field(name="from")
    message: Message | None = None
    chat_instance: str = ""
    data: str | None = None


class ChatMember(msgspec.Struct, kw_only=True):
    status: str
    user: User | None = None


class ChatMemberUpdated(msgspec.Struct, kw_only=True):
    chat: Chat
    from_: User | None = msgspec.field(default=None, name="from")
    date: int = 0
    old_chat_member: ChatMember | None = None
    new_chat_member: ChatMember | None = None


class Update(msgspec.Struct, kw_only=True):
    update_id: int
    message: Message | None = None
    edited_message: Message | None = None
    channel_post: Message | None = None
    edited_channel_post: Message | None = None
    callback_query: CallbackQuery | None = None
    my_chat_member: ChatMemberUpdated | None = None
    chat_member: ChatMemberUpdated | None = None


class UpdateId(msgspec.Struct):
    """Just enough of an update to store it: every other field is read later."""

    update_id: int


# Outgoing: omit_defaults keeps optional parameters out of the request body.
class InlineKeyboardButton(msgspec.Struct, kw_only=True, omit_defaults=True):
    text: str
    callback_data: str | None = None
    url: str | None = None


class InlineKeyboardMarkup(msgspec.Struct, kw_only=True, omit_defaults=True):
    inline_keyboard: list[list[InlineKeyboardButton]]


class SendMessage(msgspec.Struct, kw_only=True, omit_defaults=True):
    chat_id: int | str
    text: str
    parse_mode: str | None = None
    message_thread_id: int | None = None
    reply_to_message_id: int | None = None
    reply_markup: InlineKeyboardMarkup | None = None
    link_preview_options: dict | None = None


class EditMessageText(msgspec.Struct, kw_only=True, omit_defaults=True):
    chat_id: int | str
    message_id: int
    text: str
    parse_mode: str | None = None
    reply_markup: InlineKeyboardMarkup | None = None
    link_preview_options: dict | None = None


class SentMessage(msgspec.Struct, kw_only=True):
    """The part of a sent Message the sink needs."""

    message_id: int


class File(msgspec.Struct, kw_only=True):
    file_id: str
    file_unique_id: str = ""
    file_size: int | None = None
    file_path: str | None = None


UPDATE_DECODER = msgspec.json.Decoder(Update)
UPDATE_ID_DECODER = msgspec.json.Decoder(UpdateId)
ENCODER = msgspec.json.Encoder()


def update_kind(update: Update) -> str:
    """A short name for the update's type, stored in the inbox for routing and logs."""
    message = update.message
    if message is not None:
        text = (message.text or "").strip()
        if text.split("@", 1)[0].split(maxsplit=1)[0:1] == ["/stop"]:
            return "stop"
        if message.media_group_id:
            return "album"
        return "command" if text.startswith("/") else "message"
    for name in ("edited_message", "channel_post", "edited_channel_post", "callback_query", "my_chat_member"):
        if getattr(update, name) is not None:
            return "callback" if name == "callback_query" else name
    if update.chat_member is not None:
        return "chat_member"
    return "unknown"


def update_chat_id(update: Update) -> int | None:
    """The chat an update belongs to (its work is ordered per chat), or None."""
    for message in (update.message, update.edited_message, update.channel_post, update.edited_channel_post):
        if message is not None:
            return message.chat.id
    if update.callback_query is not None:
        if update.callback_query.message is not None:
            return update.callback_query.message.chat.id
        return update.callback_query.from_.id
    for member in (update.my_chat_member, update.chat_member):
        if member is not None:
            return member.chat.id
    return None
