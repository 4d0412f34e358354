"""The interactive chat's sink, rendered by a real Rich console into a buffer: what stays on screen."""

from __future__ import annotations

import io
import re

from rich.console import Console

from lib.commands.chat_live import TerminalSink

# Cursor hiding and showing: the only control codes a terminal console that is not interactive
# (no cursor movement) writes around a live region.
CURSOR = re.compile(r"\x1b\[\?25[hl]")


class Screen(io.StringIO):
    def lines(self) -> list[str]:
        """What stays on screen, line by line, without trailing blanks."""
        return [line.rstrip() for line in CURSOR.sub("", self.getvalue()).splitlines()]


def console() -> tuple[Console, Screen]:
    screen = Screen()
    return Console(file=screen, width=60, color_system=None, force_terminal=True, force_interactive=False), screen


async def test_text_before_a_tool_stays_above_its_line_and_the_answer_goes_on_below():
    terminal, screen = console()
    sink = TerminalSink(terminal)

    await sink.typing()
    await sink.update("Let me **check**")
    await sink.update("Let me **check** the zone. ")
    await sink.tool_started("set_timezone", {"timezone": "Europe/Lisbon"})
    await sink.tool_finished("set_timezone", is_error=False)
    await sink.typing()
    await sink.update("Let me **check** the zone.\n\nDone: it is")
    await sink.finish("Let me **check** the zone.\n\nDone: it is 14:05 in Lisbon.")

    lines = screen.lines()
    assert lines[0] == "Let me check the zone."
    assert lines[1].startswith("✓ set_timezone: Europe/Lisbon (") and lines[1].endswith(" s)")
    assert lines[2:] == ["Done: it is 14:05 in Lisbon."]


async def test_line_breaks_of_the_answer_are_kept_as_telegram_keeps_them():
    terminal, screen = console()
    sink = TerminalSink(terminal)

    await sink.finish("Your day:\n9:00 dentist\n14:00 call with *Ada*")

    assert screen.lines() == ["Your day:", "9:00 dentist", "14:00 call with Ada"]


async def test_a_failure_keeps_the_partial_answer_and_says_what_went_wrong():
    terminal, screen = console()
    sink = TerminalSink(terminal)

    await sink.update("The first half")
    await sink.fail("The model is overloaded; try again in a minute.")

    assert screen.lines() == [
        "The first half",
        "[the partial answer above is incomplete]",
        "Error: The model is overloaded; try again in a minute.",
    ]


async def test_a_failed_tool_run_is_marked():
    terminal, screen = console()
    sink = TerminalSink(terminal)

    await sink.tool_started("bash", {"command": "ls /nowhere\n  && echo done"})
    await sink.tool_finished("bash", is_error=True)

    assert screen.lines()[0].startswith("✗ bash: ls /nowhere && echo done (")
