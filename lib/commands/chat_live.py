"""The interactive chat's OutputSink and ToolWatcher: the answer rendered as Markdown while it streams
(Rich), a spinner while Ash thinks or a tool runs, and a line for each finished tool run."""

from __future__ import annotations

import time

from rich.console import Console
from rich.live import Live
from rich.markdown import Markdown
from rich.status import Status
from rich.text import Text

from lib.commands.chat_sink import describe_tool_call

# Markdown is parsed again at each refresh, not at each streamed token: a few times a second is
# smooth to read and keeps a long answer from costing a parse per token.
REFRESHES_PER_SECOND = 8


class ChatMarkdown(Markdown):
    """Markdown shown as Telegram shows it: each line break of the text is a line break on screen
    (CommonMark would join the lines of a paragraph, running a list written without bullets together)."""

    def __init__(self, markup: str) -> None:
        super().__init__(markup)
        for block in self.parsed:
            for token in block.children or ():
                if token.type == "softbreak":
                    token.type = "hardbreak"


class TerminalSink:
    """One turn's output in the terminal. Text before a tool run stays printed above its tool line;
    the live region only ever holds the part of the answer written since."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._live: Live | None = None
        self._status: Status | None = None
        self._latest = ""  # the whole answer so far, as the turn last gave it
        self._printed = ""  # the part of it already printed for good, above a tool line
        self._live_text = ""  # the part the live region shows
        self._tool = ""
        self._tool_started_at = 0.0

    async def typing(self) -> None:
        """A spinner until the first words arrive."""
        if self._live is None:
            self._spin("thinking…")

    async def update(self, text: str) -> None:
        """Show the answer so far, rendered."""
        self._stop_spinner()
        self._latest = text
        self._live_text = self._unprinted(text)
        if self._live is None:
            self._live = Live(
                console=self.console,
                get_renderable=lambda: ChatMarkdown(self._live_text),
                refresh_per_second=REFRESHES_PER_SECOND,
                # While streaming, a tall answer is cut at the screen's bottom (a terminal cannot
                # redraw what scrolled away); the last render, at stop, prints all of it.
                vertical_overflow="ellipsis",
            )
            self._live.start()

    def _unprinted(self, text: str) -> str:
        if not self._printed:
            return text
        # After a tool run the turn gives back the earlier steps trimmed, a blank line after them.
        kept = self._printed.rstrip()
        return text[len(kept) :].lstrip("\n") if text.startswith(kept) else text

    async def finish(self, text: str) -> None:
        """Print the final answer in full."""
        await self.update(text)
        self._end_live()

    async def fail(self, text: str) -> None:
        """Keep what was shown, then say what went wrong."""
        self._stop_spinner()
        self._end_live()
        if self._latest:
            self.console.print(Text("[the partial answer above is incomplete]", style="dim"))
        self.console.print(Text(f"Error: {text}", style="bold red"))

    async def tool_started(self, name: str, tool_input: dict) -> None:
        """Print the text so far for good and spin with the tool's name until it is done."""
        self._end_live()
        self._printed = self._latest
        self._tool = describe_tool_call(name, tool_input)
        self._tool_started_at = time.monotonic()
        self._spin(f"running {self._tool}")

    async def tool_finished(self, name: str, *, is_error: bool) -> None:
        """One line per tool run: what ran, whether it worked, how long it took."""
        self._stop_spinner()
        seconds = time.monotonic() - self._tool_started_at
        mark, style = ("✗", "red") if is_error else ("✓", "dim")
        self.console.print(Text(f"{mark} {self._tool} ({seconds:.1f} s)", style=style))

    async def ask(self, request) -> bool:
        """A risky call waits for y/N: the text so far stays, the call is shown, then the question."""
        from lib.commands.chat_approval import ask_yes_no, question

        self._stop_spinner()
        self._end_live()
        self._printed = self._latest
        self.console.print(Markdown(question(request)))
        return await ask_yes_no()

    def halt(self) -> None:
        """The turn was stopped: keep what was written and say so."""
        self._stop_spinner()
        self._end_live()
        self.console.print(Text("Stopped.", style="dim"))

    def _spin(self, what: str) -> None:
        self._stop_spinner()
        self._end_live()
        self._status = self.console.status(Text(what, style="dim"))
        self._status.start()

    def _stop_spinner(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def _end_live(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
