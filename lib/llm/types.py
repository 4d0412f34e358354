"""Provider-neutral messages, requests, responses and stream events.

The agent speaks only these types; each provider module translates them to and from its SDK.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True)
class TextBlock:
    text: str


@dataclass(frozen=True)
class ImageBlock:
    data: bytes
    media_type: str = "image/jpeg"


@dataclass(frozen=True)
class ToolUseBlock:
    """The model asks to run tool `name` with `input`; `id` pairs it with its result."""

    id: str
    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class ToolResultBlock:
    """A tool's output handed back to the model, as data."""

    tool_use_id: str
    content: str
    is_error: bool = False


Block = TextBlock | ImageBlock | ToolUseBlock | ToolResultBlock


@dataclass(frozen=True)
class Message:
    role: Literal["user", "assistant"]
    content: tuple[Block, ...]

    @classmethod
    def user_text(cls, text: str) -> Message:
        """A user message holding only text."""
        return cls("user", (TextBlock(text),))

    @classmethod
    def assistant_text(cls, text: str) -> Message:
        """An assistant message holding only text."""
        return cls("assistant", (TextBlock(text),))


@dataclass(frozen=True)
class ToolSpec:
    """A tool as the model sees it: name, description and JSON schema of its input."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class Request:
    """One model call. `model`, `max_tokens` and `temperature` come from the chosen config."""

    system: str
    messages: tuple[Message, ...]
    model: str
    max_tokens: int = 4096
    temperature: float | None = None
    tools: tuple[ToolSpec, ...] = ()


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0


# Why the model stopped, normalised: end_turn | tool_use | max_tokens | context_window |
# content_filter | refusal | other.
StopReason = str

# Stop reasons that leave the answer unfinished: the length limit, a full context window, the
# provider's content filter, or the model declining to go on.
INCOMPLETE = frozenset({"max_tokens", "context_window", "content_filter", "refusal"})


@dataclass
class Response:
    content: list[Block]
    stop_reason: StopReason
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    provider: str = ""
    # The provider's own words on why it stopped, when it gave some (Anthropic's refusal
    # `stop_details.explanation`).
    stop_explanation: str = ""

    @property
    def incomplete(self) -> bool:
        """True when the answer was cut or refused rather than finished."""
        return self.stop_reason in INCOMPLETE

    @property
    def text(self) -> str:
        """All text blocks joined."""
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def tool_uses(self) -> list[ToolUseBlock]:
        """The tool calls the model asked for, in order."""
        return [b for b in self.content if isinstance(b, ToolUseBlock)]


@dataclass(frozen=True)
class TextDelta:
    """A piece of streamed answer text."""

    text: str


@dataclass(frozen=True)
class Completed:
    """The last stream event: the whole response, tool inputs assembled."""

    response: Response


StreamEvent = TextDelta | Completed
