"""Where in a chat an answer goes: its forum topic, its channel direct-messages topic, and the
message it replies to. The Bot API's rules (https://core.telegram.org/bots/api#sendmessage):

- `message_thread_id` names a forum topic, "for forum supergroups and private chats of bots with
  forum topic mode enabled only". A message is in a topic when `is_topic_message` is set. An
  ordinary supergroup also sets `message_thread_id` on replies (the reply thread), and a forum
  sets none in its General topic: neither is a topic to send to.
- `direct_messages_topic_id` is required in a channel's direct messages chat.
- In groups an answer replies to the question (`reply_parameters`), so a busy group sees what it
  answers; `allow_sending_without_reply` still delivers it if the question was deleted.
"""

from __future__ import annotations

from dataclasses import dataclass

from lib.telegram.types import Message, ReplyParameters

GROUP_TYPES = ("group", "supergroup")


@dataclass(frozen=True)
class Placement:
    """Where a message is sent within its chat; the default is the chat itself."""

    message_thread_id: int | None = None
    direct_messages_topic_id: int | None = None
    reply_to: int | None = None

    @property
    def reply_parameters(self) -> ReplyParameters | None:
        """sendMessage's reply_parameters for `reply_to`."""
        if self.reply_to is None:
            return None
        return ReplyParameters(message_id=self.reply_to, allow_sending_without_reply=True)

    def without_reply(self) -> Placement:
        """The same topic, replying to nothing (the later parts of a long answer)."""
        return Placement(self.message_thread_id, self.direct_messages_topic_id)


CHAT = Placement()


def topic_of(message: Message, bot_has_topics: bool) -> int | None:
    """The forum topic a message was sent to, or None (`bot_has_topics`: getMe's has_topics_enabled)."""
    if not message.is_topic_message or message.message_thread_id is None:
        return None
    if message.chat.type == "supergroup" and message.chat.is_forum:
        return message.message_thread_id
    if message.chat.type == "private" and bot_has_topics:
        return message.message_thread_id
    return None


def answer_placement(message: Message, bot_has_topics: bool) -> Placement:
    """Where the answer to `message` goes: its topic, and in a group a reply to it."""
    dm_topic = message.direct_messages_topic
    return Placement(
        message_thread_id=topic_of(message, bot_has_topics),
        direct_messages_topic_id=dm_topic.topic_id if dm_topic is not None else None,
        reply_to=message.message_id if message.chat.type in GROUP_TYPES else None,
    )
