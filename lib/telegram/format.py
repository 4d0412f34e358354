"""The model's Markdown as Telegram HTML, split into messages Telegram accepts.

lib/telegram/markdown.py (blocks) and inline_markdown.py (inside a line) read the Markdown into
lines of runs (characters with their formats); this module writes them as HTML within Telegram's
rules (lib/telegram/html_rules.py quotes them): code may not sit inside bold, italic,
strikethrough or a link, so those are closed before inline code and reopened after it (code
inside a link's text shows as the link's plain text), a code block without a language is a bare
`<pre>`, and quotations are `<blockquote>`. Every message is checked against the rules before it
leaves; one that broke them (a bug) would go out as escaped text rather than be refused by
Telegram.

A message's visible text (tags removed, entities counted as one character) may hold at most 4096
UTF-16 code units (https://core.telegram.org/bots/api#sendmessage), so long answers are split
on paragraph or line boundaries; a code block or quotation cut in two is closed and reopened,
and a single line longer than a message is cut at a space with its formatting kept.
"""

from __future__ import annotations

import html
import logging
import re

from lib.telegram.html_rules import violation
from lib.telegram.inline_markdown import Run, tag_name
from lib.telegram.markdown import Block, Line, read_lines

log = logging.getLogger("ash.telegram")

MAX_MESSAGE_UNITS = 4096
TAG = re.compile(r"<[^>]*>")


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, the unit Telegram counts in."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def visible_text(fragment: str) -> str:
    """What a user sees of a Telegram HTML fragment: tags removed, entities decoded."""
    return html.unescape(TAG.sub("", fragment))


def _escape(text: str) -> str:
    return html.escape(text, quote=False)


def _open_tag(block: Block) -> str:
    if block.kind == "quote":
        return "<blockquote>"
    # Telegram takes <pre><code> as one entity only when the code names a language.
    return f'<pre><code class="language-{block.language}">' if block.language else "<pre>"


def _close_tag(block: Block) -> str:
    if block.kind == "quote":
        return "</blockquote>"
    return "</code></pre>" if block.language else "</pre>"


def _runs_html(runs: tuple[Run, ...]) -> str:
    """HTML for runs: only the tags that change between two runs are closed and opened."""
    out: list[str] = []
    opened: tuple[str, ...] = ()
    for run in runs:
        if not run.text:
            continue
        # Telegram forbids code inside any other inline entity: close them all around it.
        wanted = () if run.code else run.marks
        same = 0
        while same < min(len(opened), len(wanted)) and opened[same] == wanted[same]:
            same += 1
        out.extend(f"</{tag_name(mark)}>" for mark in reversed(opened[same:]))
        out.extend(f"<{mark}>" for mark in wanted[same:])
        opened = wanted
        out.append(f"<code>{_escape(run.text)}</code>" if run.code else _escape(run.text))
    out.extend(f"</{tag_name(mark)}>" for mark in reversed(opened))
    return "".join(out)


def _join(lines: list[Line]) -> str:
    """HTML for consecutive lines joined by newlines, each block's lines inside its tags."""
    out: list[str] = []
    current: Block | None = None
    for index, line in enumerate(lines):
        if line.block != current:
            if current is not None:
                out.append(_close_tag(current))
            if index:
                out.append("\n")
            if line.block is not None:
                out.append(_open_tag(line.block))
            current = line.block
        elif index:
            out.append("\n")
        out.append(_runs_html(line.runs))
    if current is not None:
        out.append(_close_tag(current))
    return "".join(out)


def _split_runs(runs: tuple[Run, ...], cut: int) -> tuple[tuple[Run, ...], tuple[Run, ...]]:
    """Runs before and after the character offset `cut`, formats kept on both sides."""
    head: list[Run] = []
    for index, run in enumerate(runs):
        if cut <= 0:
            return tuple(head), runs[index:]
        if cut < len(run.text):
            head.append(Run(run.text[:cut], run.marks, run.code))
            return tuple(head), (Run(run.text[cut:], run.marks, run.code), *runs[index + 1 :])
        head.append(run)
        cut -= len(run.text)
    return tuple(head), ()


def _prefix_within(text: str, limit: int) -> int:
    """How many characters of `text` fit in `limit` UTF-16 units (at least one)."""
    end, units = 0, 0
    for char in text:
        units += 2 if ord(char) > 0xFFFF else 1
        if units > limit:
            break
        end += 1
    return max(end, 1)


def _cut_long(line: Line, limit: int) -> list[Line]:
    """Split one line that alone is over the limit, at spaces when possible."""
    pieces: list[Line] = []
    while utf16_len(line.text) > limit:
        end = _prefix_within(line.text, limit)
        space = line.text.rfind(" ", 0, end)
        head, tail = _split_runs(line.runs, space + 1 if space > end // 2 else end)
        pieces.append(Line(head, line.block))
        line = Line(tail, line.block)
    pieces.append(line)
    return pieces


def _visible_units(lines: list[Line]) -> int:
    return sum(utf16_len(line.text) for line in lines) + max(len(lines) - 1, 0)


def _is_blank(line: Line) -> bool:
    return line.block is None and not line.text.strip()


def _trim(lines: list[Line]) -> list[Line]:
    """Drop blank lines at either end of a message."""
    start, end = 0, len(lines)
    while start < end and _is_blank(lines[start]):
        start += 1
    while end > start and _is_blank(lines[end - 1]):
        end -= 1
    return lines[start:end]


def _cut_point(lines: list[Line], limit: int) -> int:
    """Where a full message ends: its last paragraph break if that keeps it half full, else all."""
    blank = max((i for i, line in enumerate(lines) if _is_blank(line)), default=-1)
    return blank if blank > 0 and _visible_units(lines[:blank]) >= limit // 2 else len(lines)


def split_html(lines: list[Line], limit: int = MAX_MESSAGE_UNITS) -> list[str]:
    """Pack rendered lines into messages of at most `limit` visible UTF-16 units each.

    A message ends at the last blank line (a paragraph break) when that keeps it at least half
    full, else after the last line that fits; a block crossing the cut is closed at the end of
    one message and reopened at the start of the next.
    """
    parts: list[list[Line]] = []
    current: list[Line] = []
    size = 0  # visible units of `current`, the newlines between its lines included
    for line in (piece for whole in lines for piece in _cut_long(whole, limit)):
        units = utf16_len(line.text)
        while current and size + 1 + units > limit:
            keep = _cut_point(current, limit)
            parts.append(current[:keep])
            current = _trim(current[keep:])
            size = _visible_units(current)
        size = size + 1 + units if current else units
        current.append(line)
    parts.append(current)
    return [_join(part) for part in map(_trim, parts) if any(line.text.strip() for line in part)]


def accepted(part: str) -> str:
    """`part` when it keeps Telegram's HTML rules; else (a renderer bug, logged) its text, escaped."""
    problem = violation(part)
    if problem is None:
        return part
    log.warning("rendered HTML breaks Telegram's rules (%s); sending the part as plain text", problem)
    return _escape(visible_text(part))


def render(markdown: str, limit: int = MAX_MESSAGE_UNITS) -> list[str]:
    """The model's Markdown as one or more Telegram HTML messages."""
    return [accepted(part) for part in split_html(read_lines(markdown.strip("\n")), limit)]


def plain(fragment: str) -> str:
    """The same message as plain text, for the retry after a parse error."""
    return visible_text(fragment)
