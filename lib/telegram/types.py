"""Bot API objects as msgspec Structs: the fields Ash reads, unknown fields accepted.

Every optional field has a default so a new Bot API field, or an old payload missing one,
never breaks decoding. Every update type and message content type of Bot API 10.1 is a field,
so lib/telegram/kinds.py can name what arrived; the ones Ash only needs to recognise are
msgspec.Raw, which costs no decoding inside them. Decoders are built once at module level.
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
    is_forum: bool = False


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
    """Where a forwarded or externally replied-to message came from: user, hidden_user, chat or channel."""

    type: str
    date: int = 0
    sender_user: User | None = None
    sender_user_name: str | None = None
    sender_chat: Chat | None = None
    chat: Chat | None = None
    author_signature: str | None = None


class TextQuote(msgspec.Struct, kw_only=True):
    """The part of the replied-to message that a reply quotes."""

    text: str = ""


class ExternalReplyInfo(msgspec.Struct, kw_only=True):
    """A replied-to message from another chat or topic: who wrote it and where (its text comes as a quote)."""

    origin: MessageOrigin | None = None
    chat: Chat | None = None


class DirectMessagesTopic(msgspec.Struct, kw_only=True):
    """The topic of a channel's direct messages chat a message belongs to."""

    topic_id: int


# The default of every raw field: absent. msgspec keeps this one object as the default (it is
# immutable), so `field is NOT_SENT` tells an absent field from a sent one.
NOT_SENT = msgspec.Raw()


class Message(msgspec.Struct, kw_only=True):
    message_id: int
    # 0 for an InaccessibleMessage (a callback's message the bot can no longer see or edit).
    date: int = 0
    chat: Chat
    from_: User | None = msgspec.field(default=None, name="from")
    sender_chat: Chat | None = None
    message_thread_id: int | None = None
    is_topic_message: bool = False
    direct_messages_topic: DirectMessagesTopic | None = None
    forward_origin: MessageOrigin | None = None
    reply_to_message: Message | None = None
    external_reply: ExternalReplyInfo | None = None
    quote: TextQuote | None = None
    media_group_id: str | None = None
    text: str | None = None
    caption: str | None = None
    entities: list[MessageEntity] = msgspec.field(default_factory=list)
    caption_entities: list[MessageEntity] = msgspec.field(default_factory=list)
    # The buttons under a message of the bot's, as a button press carries it back.
    reply_markup: InlineKeyboardMarkup | None = None
    photo: list[PhotoSize] = msgspec.field(default_factory=list)
    voice: Voice | None = None
    document: Document | None = None
    # Content Ash does not read (yet): it says so.
    animation: msgspec.Raw = NOT_SENT
    audio: msgspec.Raw = NOT_SENT
    live_photo: msgspec.Raw = NOT_SENT
    paid_media: msgspec.Raw = NOT_SENT
    sticker: msgspec.Raw = NOT_SENT
    story: msgspec.Raw = NOT_SENT
    video: msgspec.Raw = NOT_SENT
    video_note: msgspec.Raw = NOT_SENT
    checklist: msgspec.Raw = NOT_SENT
    contact: msgspec.Raw = NOT_SENT
    dice: msgspec.Raw = NOT_SENT
    game: msgspec.Raw = NOT_SENT
    poll: msgspec.Raw = NOT_SENT
    venue: msgspec.Raw = NOT_SENT
    location: msgspec.Raw = NOT_SENT
    invoice: msgspec.Raw = NOT_SENT
    giveaway: msgspec.Raw = NOT_SENT
    giveaway_winners: msgspec.Raw = NOT_SENT
    rich_message: msgspec.Raw = NOT_SENT
    # Service messages: something happened in the chat; nobody wrote anything to answer.
    new_chat_members: msgspec.Raw = NOT_SENT
    left_chat_member: msgspec.Raw = NOT_SENT
    chat_owner_left: msgspec.Raw = NOT_SENT
    chat_owner_changed: msgspec.Raw = NOT_SENT
    new_chat_title: msgspec.Raw = NOT_SENT
    new_chat_photo: msgspec.Raw = NOT_SENT
    delete_chat_photo: msgspec.Raw = NOT_SENT
    group_chat_created: msgspec.Raw = NOT_SENT
    supergroup_chat_created: msgspec.Raw = NOT_SENT
    channel_chat_created: msgspec.Raw = NOT_SENT
    message_auto_delete_timer_changed: msgspec.Raw = NOT_SENT
    migrate_to_chat_id: msgspec.Raw = NOT_SENT
    migrate_from_chat_id: msgspec.Raw = NOT_SENT
    pinned_message: msgspec.Raw = NOT_SENT
    successful_payment: msgspec.Raw = NOT_SENT
    refunded_payment: msgspec.Raw = NOT_SENT
    users_shared: msgspec.Raw = NOT_SENT
    chat_shared: msgspec.Raw = NOT_SENT
    gift: msgspec.Raw = NOT_SENT
    unique_gift: msgspec.Raw = NOT_SENT
    gift_upgrade_sent: msgspec.Raw = NOT_SENT
    connected_website: msgspec.Raw = NOT_SENT
    write_access_allowed: msgspec.Raw = NOT_SENT
    passport_data: msgspec.Raw = NOT_SENT
    proximity_alert_triggered: msgspec.Raw = NOT_SENT
    boost_added: msgspec.Raw = NOT_SENT
    chat_background_set: msgspec.Raw = NOT_SENT
    checklist_tasks_done: msgspec.Raw = NOT_SENT
    checklist_tasks_added: msgspec.Raw = NOT_SENT
    direct_message_price_changed: msgspec.Raw = NOT_SENT
    forum_topic_created: msgspec.Raw = NOT_SENT
    forum_topic_edited: msgspec.Raw = NOT_SENT
    forum_topic_closed: msgspec.Raw = NOT_SENT
    forum_topic_reopened: msgspec.Raw = NOT_SENT
    general_forum_topic_hidden: msgspec.Raw = NOT_SENT
    general_forum_topic_unhidden: msgspec.Raw = NOT_SENT
    giveaway_created: msgspec.Raw = NOT_SENT
    giveaway_completed: msgspec.Raw = NOT_SENT
    managed_bot_created: msgspec.Raw = NOT_SENT
    paid_message_price_changed: msgspec.Raw = NOT_SENT
    poll_option_added: msgspec.Raw = NOT_SENT
    poll_option_deleted: msgspec.Raw = NOT_SENT
    suggested_post_approved: msgspec.Raw = NOT_SENT
    suggested_post_approval_failed: msgspec.Raw = NOT_SENT
    suggested_post_declined: msgspec.Raw = NOT_SENT
    suggested_post_paid: msgspec.Raw = NOT_SENT
    suggested_post_refunded: msgspec.Raw = NOT_SENT
    video_chat_scheduled: msgspec.Raw = NOT_SENT
    video_chat_started: msgspec.Raw = NOT_SENT
    video_chat_ended: msgspec.Raw = NOT_SENT
    video_chat_participants_invited: msgspec.Raw = NOT_SENT
    web_app_data: msgspec.Raw = NOT_SENT


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
    callback_query: CallbackQuery | None = None
    my_chat_member: ChatMemberUpdated | None = None
    # Kinds Ash never answers (UNHANDLED_UPDATES), kept raw: only their presence is read.
    edited_message: msgspec.Raw = NOT_SENT
    channel_post: msgspec.Raw = NOT_SENT
    edited_channel_post: msgspec.Raw = NOT_SENT
    business_connection: msgspec.Raw = NOT_SENT
    business_message: msgspec.Raw = NOT_SENT
    edited_business_message: msgspec.Raw = NOT_SENT
    deleted_business_messages: msgspec.Raw = NOT_SENT
    guest_message: msgspec.Raw = NOT_SENT
    message_reaction: msgspec.Raw = NOT_SENT
    message_reaction_count: msgspec.Raw = NOT_SENT
    inline_query: msgspec.Raw = NOT_SENT
    chosen_inline_result: msgspec.Raw = NOT_SENT
    shipping_query: msgspec.Raw = NOT_SENT
    pre_checkout_query: msgspec.Raw = NOT_SENT
    purchased_paid_media: msgspec.Raw = NOT_SENT
    poll: msgspec.Raw = NOT_SENT
    poll_answer: msgspec.Raw = NOT_SENT
    chat_member: msgspec.Raw = NOT_SENT
    chat_join_request: msgspec.Raw = NOT_SENT
    chat_boost: msgspec.Raw = NOT_SENT
    removed_chat_boost: msgspec.Raw = NOT_SENT
    managed_bot: msgspec.Raw = NOT_SENT


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


class ReplyParameters(msgspec.Struct, kw_only=True, omit_defaults=True):
    message_id: int
    allow_sending_without_reply: bool = False


class SendMessage(msgspec.Struct, kw_only=True, omit_defaults=True):
    chat_id: int | str
    text: str
    parse_mode: str | None = None
    message_thread_id: int | None = None
    direct_messages_topic_id: int | None = None
    reply_parameters: ReplyParameters | None = None
    reply_markup: InlineKeyboardMarkup | None = None
    link_preview_options: dict | None = None


class EditMessageText(msgspec.Struct, kw_only=True, omit_defaults=True):
    chat_id: int | str
    message_id: int
    text: str
    parse_mode: str | None = None
    reply_markup: InlineKeyboardMarkup | None = None
    link_preview_options: dict | None = None


class BotCommand(msgspec.Struct, kw_only=True):
    """One entry of the command menu Telegram shows (setMyCommands)."""

    command: str
    description: str


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
