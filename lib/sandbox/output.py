"""What one command did, and the text the model reads about it.

A command's output is capped while it streams (`OutputCap` keeps its first and last bytes and
counts what falls between), so a command that prints without end costs bounded memory.
`describe` turns a `CommandResult` into the model's text: the output, then one line on how the
command ended (exit code, time limit, out of memory).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lib.config import SandboxConfig

# A command killed by SIGKILL exits 128 + 9; the sandbox then asks the container's cgroup
# whether the OOM killer sent it (scripts.OOM_COUNTER) before it calls the result `oom`.
SIGKILL_EXIT = 137


@dataclass(frozen=True)
class CommandResult:
    """What one command did: its (capped) output, exit code, duration and why it stopped."""

    output: str
    exit_code: int | None
    duration: float
    timed_out: bool = False
    oom: bool = False
    truncated: bool = False
    output_bytes: int = 0


class OutputCap:
    """Keeps the first and last `limit // 2` bytes of a stream, counting what falls between."""

    def __init__(self, limit: int):
        self.limit = max(limit, 2)
        self.head = bytearray()
        self.tail: deque[bytes] = deque()
        self.tail_size = 0
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        """Add a chunk of output; memory stays bounded however much the command prints."""
        self.total += len(chunk)
        room = self.limit // 2 - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        self.tail.append(chunk)
        self.tail_size += len(chunk)
        keep = self.limit - self.limit // 2
        while self.tail_size - len(self.tail[0]) >= keep:
            self.tail_size -= len(self.tail.popleft())

    @property
    def truncated(self) -> bool:
        return self.total > self.limit

    def text(self) -> str:
        """The output, with the cut noted where the middle was dropped."""
        tail = b"".join(self.tail)
        if not self.truncated:
            return (bytes(self.head) + tail).decode("utf-8", "replace")
        keep = self.limit - self.limit // 2
        tail = tail[-keep:]
        cut = self.total - len(self.head) - len(tail)
        head = bytes(self.head).decode("utf-8", "replace")
        return f"{head}\n[... {cut} bytes of output cut; first and last {len(tail)} bytes kept ...]\n" + tail.decode(
            "utf-8", "replace"
        )


def describe(result: CommandResult, config: SandboxConfig) -> str:
    """The text the model sees: the output, then one line on how the command ended."""
    body = result.output if result.output else "(no output)"
    if not body.endswith("\n"):
        body += "\n"
    if result.timed_out:
        status = (
            f"[killed: the command exceeded the {config.timeout:g} s time limit; "
            "the sandbox was restarted, /workspace is kept]"
        )
    elif result.oom:
        status = (
            f"[killed: out of memory (limit {config.memory_limit}); exit code {result.exit_code}; "
            "the sandbox was restarted, /workspace is kept]"
        )
    else:
        status = f"[exit code {result.exit_code}]"
    return f"{body}{status} ({result.duration:.2f} s)"
