"""What kind of update, and what kind of message, Telegram sent: the names the inbox stores
and the logs use, and why Ash leaves some of them unanswered.

The lists follow Bot API 10.1 (tests/fixtures/telegram/bot_api_10_1_types.json names every
Update and Message field with its source). A kind is read from the fields present, so the
common case, a text message, costs one attribute check.
"""

from __future__ import annotations

import msgspec

from lib.telegram.types import NOT_SENT, Message, Update

# Update fields Ash never answers, and why. Their updates are stored already skipped
# (lib/inbox/queue.py UNANSWERED_KINDS), with this reason in the log.
UNHANDLED_UPDATES = {
    "edited_message": "Ash answers each message once and does not answer it again when it is edited",
    "channel_post": "Ash does not answer channel posts",
    "edited_channel_post": "Ash does not answer channel posts",
    "business_connection": "Ash is not a business bot",
    "business_message": "Ash is not a business bot",
    "edited_business_message": "Ash is not a business bot",
    "deleted_business_messages": "Ash is not a business bot",
    "guest_message": "Ash does not take part in chats as a guest",
    "message_reaction": "Ash does not act on reactions",
    "message_reaction_count": "Ash does not act on reactions",
    "inline_query": "Ash has no inline mode",
    "chosen_inline_result": "Ash has no inline mode",
    "shipping_query": "Ash sells nothing",
    "pre_checkout_query": "Ash sells nothing",
    "purchased_paid_media": "Ash sells nothing",
    "poll": "Ash does not handle polls",
    "poll_answer": "Ash does not handle polls",
    "chat_member": "Ash does not follow other members of a chat",
    "chat_join_request": "Ash does not manage who joins a chat",
    "chat_boost": "Ash does not follow chat boosts",
    "removed_chat_boost": "Ash does not follow chat boosts",
    "managed_bot": "Ash manages no other bots",
}
SERVICE = "service"
# A group became a supergroup (a service message Ash acts on: the chat's state moves, lib/telegram/chat_moves.py).
MIGRATION = "migration"
# Consolidation's daily review message: work Ash queues itself (lib/telegram/review_message.py).
REVIEW = "memory_review"
SERVICE_REASON = "a service message: something happened in the chat, nobody wrote anything to answer"

# Message content Ash reads: text and photos, and files it reads into text or images
# (READ_FILES). An animation also carries its `document`: the unread animation is looked for first.
READ_FILES = ("document",)
# Recordings Ash transcribes into text (lib/telegram/listening.py).
READ_RECORDINGS = ("voice", "audio", "video_note")
# What each recording is called when Ash speaks of it.
RECORDING_NOUNS = {"voice": "voice note", "audio": "audio file", "video_note": "video message"}
READ_CONTENT = ("text", "photo", *READ_FILES, *READ_RECORDINGS)
# Message content Ash cannot read, and what it tells the sender about it. An animation also
# carries its `document`, and a venue its `location`: the specific one comes first.
UNREAD_CONTENT = {
    "animation": "I can't watch GIFs yet; please describe it in text.",
    "live_photo": "I can't open live photos yet; please send it as an ordinary photo.",
    "paid_media": "I can't open paid media; please describe it in text.",
    "sticker": "Nice sticker! I can't see stickers; tell me in words, or send a photo, a voice note or a file.",
    "story": "I can't watch stories yet; please tell me about it in text.",
    "video": "I can't watch videos yet; please describe it in text.",
    "checklist": "I can't read checklists yet; please paste the items as text.",
    "contact": "I can't read shared contacts yet; please type the details you want me to know.",
    "dice": "I can't play dice yet; tell me in words what you'd like to do.",
    "game": "I can't play games here; tell me in words what you'd like to do.",
    "poll": "I can't read polls yet; please type the question and the options.",
    "venue": "I can't read shared places yet; please type the name and address.",
    "location": "I can't read shared locations yet; please type the place or address.",
    "invoice": "I can't handle invoices or payments.",
    "giveaway": "I can't take part in giveaways.",
    "giveaway_winners": "I can't take part in giveaways.",
    "rich_message": "I can't read rich messages yet; please send it as plain text.",
}
SERVICE_CONTENT = (
    "new_chat_members",
    "left_chat_member",
    "chat_owner_left",
    "chat_owner_changed",
    "new_chat_title",
    "new_chat_photo",
    "delete_chat_photo",
    "group_chat_created",
    "supergroup_chat_created",
    "channel_chat_created",
    "message_auto_delete_timer_changed",
    "migrate_to_chat_id",
    "migrate_from_chat_id",
    "pinned_message",
    "successful_payment",
    "refunded_payment",
    "users_shared",
    "chat_shared",
    "gift",
    "unique_gift",
    "gift_upgrade_sent",
    "connected_website",
    "write_access_allowed",
    "passport_data",
    "proximity_alert_triggered",
    "boost_added",
    "chat_background_set",
    "checklist_tasks_done",
    "checklist_tasks_added",
    "direct_message_price_changed",
    "forum_topic_created",
    "forum_topic_edited",
    "forum_topic_closed",
    "forum_topic_reopened",
    "general_forum_topic_hidden",
    "general_forum_topic_unhidden",
    "giveaway_created",
    "giveaway_completed",
    "managed_bot_created",
    "paid_message_price_changed",
    "poll_option_added",
    "poll_option_deleted",
    "suggested_post_approved",
    "suggested_post_approval_failed",
    "suggested_post_declined",
    "suggested_post_paid",
    "suggested_post_refunded",
    "video_chat_scheduled",
    "video_chat_started",
    "video_chat_ended",
    "video_chat_participants_invited",
    "web_app_data",
)


def message_content(message: Message) -> str | None:
    """The message's content field ("text", "photo", "voice", "pinned_message", ...), or None
    for content newer than Bot API 10.1."""
    if message.text is not None:
        return "text"
    if message.photo:
        return "photo"
    for name in (*UNREAD_CONTENT, *READ_FILES, *READ_RECORDINGS, *SERVICE_CONTENT):
        if _present(getattr(message, name)):
            return name
    return None


def _present(value: object) -> bool:
    # An absent typed field is None; an absent raw one is the shared default, types.NOT_SENT.
    return value is not None and value is not NOT_SENT


def migration(message: Message) -> tuple[int, int] | None:
    """(old chat id, new chat id) when the message says a group became a supergroup: sent in the
    old group with `migrate_to_chat_id`, and in the new supergroup with `migrate_from_chat_id`."""
    for name, moved_to in (("migrate_to_chat_id", True), ("migrate_from_chat_id", False)):
        raw = getattr(message, name)
        if not _present(raw):
            continue
        try:
            other = msgspec.json.decode(raw, type=int)
        except msgspec.DecodeError:
            return None
        return (message.chat.id, other) if moved_to else (other, message.chat.id)
    return None


def message_kind(message: Message) -> str:
    """stop, command, album, migration, service or message."""
    text = message.text
    if text is not None:
        text = text.strip()
        if text.split("@", 1)[0].split(maxsplit=1)[0:1] == ["/stop"]:
            return "stop"
        return "command" if text.startswith("/") else "message"
    if message.media_group_id:
        return "album"
    if migration(message) is not None:
        return MIGRATION
    return SERVICE if message_content(message) in SERVICE_CONTENT else "message"


def update_kind(update: Update) -> str:
    """A short name for the update's type, stored in the inbox for routing and logs."""
    if update.message is not None:
        return message_kind(update.message)
    if update.callback_query is not None:
        return "callback"
    if update.my_chat_member is not None:
        return "my_chat_member"
    for name in UNHANDLED_UPDATES:
        if _present(getattr(update, name)):
            return name
    return "unknown"


def skip_reason(update: Update, kind: str) -> str:
    """Why an update of a kind Ash never answers is skipped, for the log."""
    if kind == SERVICE:
        return f"{message_content(update.message)}, {SERVICE_REASON}"
    return UNHANDLED_UPDATES.get(kind, "it carries none of the update types Ash knows (Bot API 10.1)")


def update_chat_id(update: Update) -> int | None:
    """The chat an update belongs to (its work is ordered per chat), or None."""
    if update.message is not None:
        return update.message.chat.id
    if update.callback_query is not None:
        if update.callback_query.message is not None:
            return update.callback_query.message.chat.id
        return update.callback_query.from_.id
    if update.my_chat_member is not None:
        return update.my_chat_member.chat.id
    return None
