"""An OutputSink that prints the streamed answer to the terminal (`ash chat`)."""

from __future__ import annotations

import click


class CliSink:
    """Prints each new piece of the answer as it streams; errors go to stderr."""

    def __init__(self) -> None:
        self._printed = ""

    async def typing(self) -> None:
        """Nothing to show in a terminal: the answer starts printing as soon as it streams."""

    async def update(self, text: str) -> None:
        """Print what was added since the last update."""
        if text.startswith(self._printed):
            click.echo(text[len(self._printed) :], nl=False)
        else:
            # An attempt died mid-stream and another answers: say so rather than splice texts.
            click.echo("\n[the answer restarted]\n" + text, nl=False)
        self._printed = text

    async def finish(self, text: str) -> None:
        """Print the rest of the final answer and end the line."""
        await self.update(text)
        click.echo()
        self._printed = ""

    async def fail(self, text: str) -> None:
        """Print the error on stderr, after whatever partial text was shown."""
        if self._printed:
            click.echo()
            click.echo("[the partial answer above is incomplete]", err=True)
        click.echo(f"Error: {text}", err=True)
        self._printed = ""
