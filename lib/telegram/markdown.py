"""The model's Markdown read into lines of formatted text, ready to be written as Telegram HTML.

Blocks, a line at a time: fenced code keeps its language (an unclosed fence, a stream cut short,
stays code), `>` lines become one quotation (Telegram can't nest them), headings and a table's
header are bold, list items start with `•`, a table's delimiter row is dropped and its cells are
joined with " | ". What is inside a line is inline Markdown (inline_markdown.py): a line is a
sequence of runs, characters with the formats around them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from lib.telegram.inline_markdown import Run, inline_runs

FENCE_OPEN = re.compile(r"^(\s*)(`{3,}|~{3,})\s*(.*?)\s*$")
FENCE_CLOSE = re.compile(r"^\s*(`{3,}|~{3,})\s*$")
LANGUAGE = re.compile(r"[\w+#.-]+", re.ASCII)
HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$")
BULLET = re.compile(r"^(\s*)[-*+]\s+(.*)$")
RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
QUOTE_MARKERS = re.compile(r"^(?:\s{0,3}>\s?)+")
TABLE_DELIMITER_ROW = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")
CELL_BORDER = re.compile(r"(?<!\\)\|")
SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class Block:
    """Lines shown inside one container: a code block (with its language) or a quotation."""

    kind: str  # "pre" or "quote"
    language: str = ""
    serial: int = 0  # two blocks of one kind in a row stay two


@dataclass(frozen=True)
class Line:
    """One line: its runs, and the block it sits in (None outside any)."""

    runs: tuple[Run, ...] = ()
    block: Block | None = None

    @cached_property
    def text(self) -> str:
        return "".join(run.text for run in self.runs)


# Blocks: a line at a time.


def _line_runs(raw: str) -> list[Run]:
    """A line outside code blocks: heading, rule, list item or text."""
    if heading := HEADING.match(raw):
        return inline_runs(heading.group(1), ("b",))
    if RULE.match(raw):
        return [Run("──────────")]
    if bullet := BULLET.match(raw):
        return [Run(f"{bullet.group(1)}• "), *inline_runs(bullet.group(2))]
    return inline_runs(raw)


def _table_cells(row: str) -> list[str]:
    row = row.strip()
    row = row[1:] if row.startswith("|") else row
    row = row[:-1] if row.endswith("|") and not row.endswith("\\|") else row
    return [cell.strip() for cell in CELL_BORDER.split(row)]


def _table_row(row: str, marks: tuple[str, ...] = ()) -> tuple[Run, ...]:
    """A table row as text: the cells, each formatted on its own, joined with " | "."""
    runs: list[Run] = []
    for index, cell in enumerate(_table_cells(row)):
        if index:
            runs.append(Run(" | "))
        runs.extend(inline_runs(cell, marks))
    return tuple(runs)


def _is_table_start(lines: list[str], index: int) -> bool:
    if index + 1 >= len(lines) or "|" not in lines[index]:
        return False
    delimiter = lines[index + 1]
    return "|" in delimiter and bool(TABLE_DELIMITER_ROW.match(delimiter))


def _fence_opening(raw: str) -> tuple[str, str, int] | None:
    """A code fence that opens a block: its marker, language and indentation, else None."""
    opening = FENCE_OPEN.match(raw)
    if opening is None:
        return None
    indent, marker, info = opening.groups()
    if marker[0] == "`" and "`" in info:
        return None  # ```x``` on one line is an inline code span, not a fence
    first_word = info.split()[0] if info else ""
    return marker, first_word if LANGUAGE.fullmatch(first_word) else "", len(indent)


def read_lines(markdown: str) -> list[Line]:
    """The Markdown as lines of runs; an unclosed fence (a stream cut short) stays code."""
    text = SURROGATE.sub("\ufffd", markdown.replace("\r\n", "\n").replace("\r", "\n"))
    raw_lines = text.split("\n")
    lines: list[Line] = []
    serial = 0
    index = 0
    quote: Block | None = None
    while index < len(raw_lines):
        raw = raw_lines[index]
        index += 1
        if fence := _fence_opening(raw):
            marker, language, indent = fence
            serial += 1
            block = Block("pre", language, serial)
            while index < len(raw_lines):
                closing = FENCE_CLOSE.match(raw_lines[index])
                index += 1
                if closing and closing.group(1)[0] == marker[0] and len(closing.group(1)) >= len(marker):
                    break
                code = raw_lines[index - 1]
                # Fence content loses the fence's own indentation (a fence inside a list item).
                code = code[min(indent, len(code) - len(code.lstrip(" "))) :]
                lines.append(Line((Run(code),), block))
            quote = None
            continue
        if QUOTE_MARKERS.match(raw):
            if quote is None:
                serial += 1
                quote = Block("quote", serial=serial)
            # Telegram can't nest quotations: every level becomes the one.
            lines.append(Line(tuple(_line_runs(QUOTE_MARKERS.sub("", raw))), quote))
            continue
        quote = None
        if _is_table_start(raw_lines, index - 1):
            lines.append(Line(_table_row(raw, ("b",))))
            index += 1  # the delimiter row says nothing a reader needs
            while index < len(raw_lines) and "|" in raw_lines[index] and raw_lines[index].strip():
                lines.append(Line(_table_row(raw_lines[index])))
                index += 1
            continue
        lines.append(Line(tuple(_line_runs(raw))))
    return lines
