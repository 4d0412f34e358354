"""An OutputSink that prints the streamed answer as plain text (`ash chat` with a message or a pipe).

The answer goes to stdout as it streams; tool runs and errors go to stderr, so piping the output
keeps only the answer.
"""

from __future__ import annotations

import json
import sys

import click

# A tool line shows this much of the arguments: enough to recognise the call, one line.
TOOL_ARGS_WIDTH = 100


def describe_tool_call(name: str, tool_input: dict) -> str:
    """One line naming a tool call: "bash: ls -la" for a single argument, else its arguments as JSON."""
    values = list(tool_input.values())
    shown = values[0] if len(values) == 1 and isinstance(values[0], str) else json.dumps(tool_input)
    shown = " ".join(shown.split())
    if len(shown) > TOOL_ARGS_WIDTH:
        shown = shown[: TOOL_ARGS_WIDTH - 1] + "…"
    return f"{name}: {shown}" if shown else name


class CliSink:
    """Prints each new piece of the answer as it streams; tool runs and errors go to stderr."""

    def __init__(self) -> None:
        self._printed = ""
        # Whether stdout's last line is unfinished (a tool line must start on a line of its own).
        self._line_open = False
        # Whether a tool line was the last thing shown: the answer goes on just under it.
        self._after_tool = False

    async def typing(self) -> None:
        """Nothing to show in a terminal: the answer starts printing as soon as it streams."""

    async def update(self, text: str) -> None:
        """Print what was added since the last update."""
        added = self._added(text)
        if added is None:
            # An attempt died mid-stream and another answers: say so rather than splice texts.
            added = "\n[the answer restarted]\n" + text
        self._echo(added)
        self._printed = text

    def _added(self, text: str) -> str | None:
        # After a tool run the steps streamed so far come back trimmed, a blank line after them.
        kept = self._printed if text.startswith(self._printed) else self._printed.rstrip()
        if not text.startswith(kept):
            return None
        added = text[len(kept) :]
        return added.lstrip("\n") if self._after_tool else added

    def _echo(self, text: str) -> None:
        if text:
            click.echo(text, nl=False)
            self._line_open = not text.endswith("\n")
            self._after_tool = False

    async def finish(self, text: str) -> None:
        """Print the rest of the final answer and end the line."""
        await self.update(text)
        click.echo()
        self._printed = ""
        self._line_open = False

    async def fail(self, text: str) -> None:
        """Print the error on stderr, after whatever partial text was shown."""
        if self._printed:
            click.echo()
            click.echo("[the partial answer above is incomplete]", err=True)
        click.echo(f"Error: {text}", err=True)
        self._printed = ""
        self._line_open = False

    async def tool_started(self, name: str, tool_input: dict) -> None:
        """Say which tool runs, on a line of its own."""
        if self._line_open:
            click.echo()
            self._line_open = False
        click.echo(f"[tool] {describe_tool_call(name, tool_input)}", err=True)
        self._after_tool = True

    async def ask(self, request) -> bool:
        """A risky call waits for y/N (lib/commands/chat_approval.py); without a terminal, No."""
        from lib.commands.chat_approval import NO_TERMINAL, ask_yes_no, question

        if self._line_open:
            click.echo()
            self._line_open = False
        click.echo(question(request), err=True)
        if not sys.stdin.isatty():
            click.echo(NO_TERMINAL, err=True)
            return False
        return await ask_yes_no()

    async def tool_finished(self, name: str, *, is_error: bool) -> None:
        """Only a failure is worth a line: the model reads the output and carries on."""
        if is_error:
            click.echo(f"[tool] {name} failed", err=True)
