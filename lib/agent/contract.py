"""The contract between a channel (Telegram, the CLI) and the agent: one turn in, text out, and
the question a risky call asks (lib/agent/approval.py decides which calls ask)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class Image:
    """An image the user sent, already downloaded."""

    data: bytes
    media_type: str = "image/jpeg"


@dataclass(frozen=True)
class TurnInput:
    """One user message to answer."""

    provider: str  # "telegram" or "cli"
    chat_id: str
    user_id: str
    text: str
    chat_type: str = "private"  # private | group | supergroup | channel
    username: str | None = None
    display_name: str | None = None
    images: tuple[Image, ...] = ()
    update_id: int | None = None
    # Where in the chat it was written: its forum topic, or its channel direct-messages topic.
    message_thread_id: int | None = None
    direct_messages_topic_id: int | None = None
    # What in this message came from someone other than the person (a document's text, a
    # forward, a quoted message, a transcript of a forwarded voice note), each named briefly,
    # e.g. "document report.pdf". Risky tool calls then wait for approval (lib/agent/approval.py).
    untrusted: tuple[str, ...] = ()
    # What history keeps of this message when it differs from `text`: a document's whole text
    # reaches the model once and is kept as knowledge, while the message keeps a short reference.
    stored_text: str | None = None
    # What the person typed themselves, when `text` holds more (context lines about a quoted or
    # forwarded message, a document); None: all of `text`. A web request whose address or query
    # is in here is the person's own (lib/agent/approval.py).
    typed_text: str | None = None
    # False: the model is offered no tools (a follow-up's check-in writes one message, nothing else).
    tools: bool = True
    # A scheduled task's prompt (lib/telegram/scheduled.py): what it saves has origin "schedule".
    scheduled: bool = False


class OutputSink(Protocol):
    """Where the agent streams its answer. Channels implement this."""

    async def typing(self) -> None:
        """Show that an answer is being prepared (Telegram's typing action)."""

    async def update(self, text: str) -> None:
        """The answer so far; the sink decides how often to show it."""

    async def finish(self, text: str) -> None:
        """The final answer: must always land, even when updates were skipped."""

    async def fail(self, text: str) -> None:
        """Replace whatever was shown with a short error message for the user."""


@runtime_checkable
class SourcesShown(Protocol):
    """A sink that can offer to show what an answer drew on (Telegram's 🧠 button); optional."""

    def sources(self, sources_id: int, count: int) -> None:
        """The answer's prompt held `count` remembered items, recorded as `sources_id`."""


class ToolWatcher(Protocol):
    """Who is shown the tool runs of a turn as they happen: the terminal does; Telegram shows only the
    answer, so it passes none (a separate protocol keeps OutputSink the same for every channel)."""

    async def tool_started(self, name: str, tool_input: dict) -> None:
        """The model called a tool with these arguments; it runs now."""

    async def tool_finished(self, name: str, *, is_error: bool) -> None:
        """The tool is done; its output goes back to the model."""


@dataclass
class TurnResult:
    """What a turn produced."""

    text: str
    ok: bool = True
    # Why the answer is unfinished, when it is: max_tokens | context_window | content_filter |
    # refusal (lib/llm/types.py INCOMPLETE). `text` then ends with a notice saying so.
    incomplete: str | None = None
    steps: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    tool_calls: list[str] = field(default_factory=list)
    # The id of the risky call the turn stopped at, waiting for Run / Deny (lib/agent/pending.py).
    waiting_for: int | None = None


@dataclass(frozen=True)
class ApprovalRequest:
    """A call waiting for Run / Deny: shown to the person exactly as the model made it."""

    id: int
    tool_name: str
    tool_input: dict
    reason: str
    timeout: float  # seconds until no answer means denied


class Approvals(Protocol):
    """How a channel asks the person about a risky call."""

    async def ask(self, request: ApprovalRequest) -> bool | None:
        """True: run it; False: do not. None: the question went out as buttons under the
        answer, and the turn waits, stored, until a press resumes it (lib/agent/resume.py)."""
