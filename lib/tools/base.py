"""The tool interface: a name, a description, an input struct, and an async `execute`."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import msgspec

if TYPE_CHECKING:
    import httpx

    from lib.config import Settings
    from lib.db import Database
    from lib.runtime import Signals
    from lib.sandbox.container import Sandbox


@dataclass(frozen=True)
class ToolContext:
    """Who a tool runs for, and what it may use. Tools never see secrets (settings hold them, but
    no tool passes one on: keys go only to the client that needs them)."""

    user_id: str
    chat_id: str
    session_id: int | None
    provider: str = "telegram"
    is_owner: bool = False
    # Whose memory the memory tools read and write: the person's own, or in a group the
    # group's (lib/memory/scope.py); None means `user_id`'s.
    memory_owner: str | None = None
    # Where in the chat the turn is (so a task scheduled from a forum topic writes there).
    chat_type: str = "private"
    message_thread_id: int | None = None
    direct_messages_topic_id: int | None = None
    settings: Settings = field(kw_only=True)
    db: Database | None = field(default=None, kw_only=True)
    # The process's HTTP client; None builds a short-lived one (tests, one-shot commands).
    http: httpx.AsyncClient | None = field(default=None, kw_only=True)
    # The sandbox to run commands in; None means the process's shared one for settings.sandbox.
    sandbox: Sandbox | None = field(default=None, kw_only=True)
    # The runtime's signals: the schedule tools emit `schedule_changed` (lib/runtime.py); None
    # outside a turn (tests, one-shot commands), where nobody listens.
    signals: Signals | None = field(default=None, kw_only=True)
    # The outside content the turn holds when the tool runs (lib/agent/approval.py names it):
    # a memory written now waits for its owner's review (lib/memory/review.py).
    outside: tuple[str, ...] = field(default=(), kw_only=True)
    # What the person wrote themselves in this message: a memory made only of their words is theirs.
    own_words: str = field(default="", kw_only=True)
    # Where a memory saved without outside content comes from: the person ("user"), or a
    # scheduled task's prompt ("schedule").
    origin: str = field(default="user", kw_only=True)
    # The asker's name as a group's transcript shows it (None in a private chat): `recall` tells
    # their own past messages from other members' (lib/memory/screen.py held_outside).
    speaker: str | None = field(default=None, kw_only=True)
    # The past messages the model already reads this turn (the prompt's memory section, the
    # conversation window, what `recall` returned so far): `recall` brings others instead.
    seen_messages: frozenset[int] = field(default=frozenset(), kw_only=True)

    @property
    def memory(self) -> str:
        """The memory owner the memory tools act on."""
        return self.memory_owner or self.user_id


@dataclass(frozen=True)
class ToolResult:
    """What a tool hands back. `output` is shown to the model as data, never as instructions."""

    output: str
    is_error: bool = False
    exit_code: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


class Tool(Protocol):
    """A tool the model may call; `Input` is a msgspec Struct describing its arguments."""

    name: ClassVar[str]
    description: ClassVar[str]
    Input: ClassVar[type[msgspec.Struct]]

    async def execute(self, args: Any, context: ToolContext) -> ToolResult: ...


@functools.cache
def input_schema(struct: type[msgspec.Struct]) -> dict[str, Any]:
    """The JSON schema of a tool's input struct, inlined (no $defs) as the LLM APIs want."""
    (schema,), components = msgspec.json.schema_components([struct], ref_template="#/$defs/{name}")
    ref = schema.get("$ref", "")
    resolved = components[ref.rsplit("/", 1)[-1]] if ref else schema
    resolved = {k: v for k, v in resolved.items() if k != "title"}
    resolved.setdefault("properties", {})
    return resolved
