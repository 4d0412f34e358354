"""What a conversation exchanges, as plain data every channel renders: who asks where, and the
answer (text and buttons).

A command's answer is Markdown text with rows of buttons; a press on a button gives a short
notice (Telegram's toast), the new answer for the message the button was under when it should
change, and sometimes a new message for the presser. Telegram draws the buttons as an inline
keyboard (lib/telegram/keyboards.py); `ash chat` as numbered choices. A button's `data` is what
comes back when it is pressed.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Asker:
    """Who asks, and where: the channel (`provider`), its chat and the chat's type."""

    provider: str
    chat_id: str
    user_id: str
    chat_type: str = "private"

    @property
    def actor(self) -> str:
        """Who the audit log names for a change they make."""
        return f"{self.provider}:{self.user_id}"


@dataclass(frozen=True)
class Button:
    """A choice offered under an answer."""

    label: str
    data: str


@dataclass(frozen=True)
class Reply:
    """An answer: Markdown text, and rows of buttons (none: no buttons)."""

    text: str
    buttons: tuple[tuple[Button, ...], ...] = ()

    @property
    def choices(self) -> tuple[Button, ...]:
        """Every button, row by row."""
        return tuple(button for row in self.buttons for button in row)


@dataclass(frozen=True)
class Press:
    """What a button press did: a short notice for the presser; the new answer for the message the
    button was under (None: it stays as it is); and a new message for the presser (None: none),
    which a channel sends privately when the press was in a group."""

    notice: str = ""
    reply: Reply | None = None
    message: Reply | None = None


def column(*buttons: Button) -> tuple[tuple[Button, ...], ...]:
    """Buttons one under another."""
    return tuple((button,) for button in buttons)
