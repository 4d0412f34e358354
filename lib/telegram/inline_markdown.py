"""Inline Markdown read the CommonMark way (https://spec.commonmark.org/0.31.2/#inlines), one
line at a time, into runs: characters with the formats around them.

Code spans first, then links and emphasis from delimiter runs, so `***x***` nests bold in italic
and a link's URL may hold parentheses. Unlike CommonMark, `*` stays literal inside a word as `_`
does (`2*3*4`, `x**2`, snake_case), and a bare URL is kept whole (its underscores are no
emphasis). Only http(s), tg and mailto links become links; others stay as written.

Keeping formats per run rather than as nested tags lets the HTML writer (format.py) obey
Telegram's nesting rules and cut a long line anywhere without unbalancing a tag.
"""

from __future__ import annotations

import html
import re
import string
import unicodedata
from bisect import bisect_left
from dataclasses import dataclass, field
from html.entities import html5

LINK_SCHEMES = ("http://", "https://", "tg://", "mailto:")

# Where inline syntax may start: everything between two of these is plain text.
INLINE_SYNTAX = re.compile(r"[\\`*_~\[\]<&]|!\[|(?<![0-9A-Za-z])https?://", re.IGNORECASE)
BACKTICKS = re.compile(r"`+")
# A bare URL is kept whole, so its underscores never become emphasis; Telegram links it itself.
BARE_URL = re.compile(r"https?://[^\s<>\[\]`\"]*", re.IGNORECASE)
URL_TRAILING_PUNCTUATION = "?!.,:;*_~'\""
AUTOLINK = re.compile(r"<([A-Za-z][A-Za-z0-9+.-]{1,31}:[^\s<>]*)>")
ENTITY_REFERENCE = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6}|([A-Za-z][A-Za-z0-9]{1,31}));")
# Nesting CommonMark lets a parser bound (commonmark.js: 32); it keeps each "](" scan short.
MAX_URL_PARENTHESES = 32
ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")
ASCII_PUNCTUATION = frozenset(string.punctuation)


@dataclass(frozen=True)
class Run:
    """Characters shown alike: `marks` are the opening tags around them, outermost first."""

    text: str
    marks: tuple[str, ...] = ()
    code: bool = False


def tag_name(mark: str) -> str:
    """The element name of a mark (`a` for `a href="..."`)."""
    return mark.split(" ", 1)[0]


# Inline Markdown: a line becomes nodes (str, _Code, _Link, _Delimiter, _Bracket), then runs.


@dataclass(frozen=True)
class _Code:
    text: str


@dataclass(frozen=True)
class _Link:
    href: str
    children: list


@dataclass
class _Bracket:
    literal: str  # "[" or "![", shown as such when no link follows
    active: bool = True  # links can't contain links: an outer "[" is disabled once one closes


@dataclass
class _Delimiter:
    """A run of `*`, `_` or `~~`: what is left of it is shown, the used part became tags."""

    char: str
    length: int
    can_open: bool
    can_close: bool
    original: int = 0
    opens: list[str] = field(default_factory=list)  # innermost first
    closes: list[str] = field(default_factory=list)  # innermost first

    def __post_init__(self) -> None:
        self.original = self.length


def _is_punctuation(char: str) -> bool:
    return unicodedata.category(char)[0] in "PS"


def _flanking(before: str, after: str) -> tuple[bool, bool]:
    """CommonMark's left- and right-flanking tests for a delimiter run between two characters."""
    left = not after.isspace() and (not _is_punctuation(after) or before.isspace() or _is_punctuation(before))
    right = not before.isspace() and (not _is_punctuation(before) or after.isspace() or _is_punctuation(after))
    return left, right


def _trim_url(url: str) -> str:
    """A bare URL without the punctuation that ends the sentence around it (GFM's rule)."""
    while url and (url[-1] in URL_TRAILING_PUNCTUATION or (url[-1] == ")" and url.count(")") > url.count("("))):
        url = url[:-1]
    return url


def _referenced(reference: re.Match) -> str:
    """What `&copy;` or `&#169;` stands for, as in CommonMark; a name HTML lacks stays as written."""
    name = reference.group(1)
    return reference.group() if name and f"{name};" not in html5 else html.unescape(reference.group())


def _skip_spaces(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t":
        pos += 1
    return pos


def _link_target(text: str, pos: int) -> tuple[str, int] | None:
    """The `(destination "title")` at `pos`: the destination and where it ends, or None."""
    if not text.startswith("(", pos):
        return None
    pos = _skip_spaces(text, pos + 1)
    if text.startswith("<", pos):
        end = text.find(">", pos + 1)
        if end < 0 or "<" in text[pos + 1 : end]:
            return None
        destination, pos = text[pos + 1 : end].replace(" ", "%20"), end + 1
    else:
        start, depth = pos, 0
        while pos < len(text) and not text[pos].isspace():
            if text[pos] == "\\" and pos + 1 < len(text) and text[pos + 1] in ASCII_PUNCTUATION:
                pos += 2
                continue
            if text[pos] == "(":
                depth += 1
                if depth > MAX_URL_PARENTHESES:
                    return None
            elif text[pos] == ")":
                if not depth:
                    break
                depth -= 1
            pos += 1
        if depth:
            return None
        destination = text[start:pos]
    pos = _skip_spaces(text, pos)
    if pos < len(text) and text[pos] in "\"'":
        end = text.find(text[pos], pos + 1)
        if end < 0:
            return None
        pos = _skip_spaces(text, end + 1)
    if not text.startswith(")", pos):
        return None
    return ENTITY_REFERENCE.sub(_referenced, ESCAPED.sub(r"\1", destination)), pos + 1


class _InlineParser:
    """One line's inline Markdown as nodes, links built as their "]" is met (CommonMark's way)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.nodes: list = []
        self.brackets: list[int] = []  # indexes in nodes of the "[" not yet closed
        # Start of every backtick run, by length: a code span ends at the next run as long.
        self.backtick_runs: dict[int, list[int]] = {}
        for run in BACKTICKS.finditer(text):
            self.backtick_runs.setdefault(len(run.group()), []).append(run.start())

    def parse(self) -> list:
        pos = 0
        while syntax := INLINE_SYNTAX.search(self.text, pos):
            self.nodes.append(self.text[pos : syntax.start()])
            pos = self._syntax(syntax.start())
        self.nodes.append(self.text[pos:])
        return _resolve_emphasis(self.nodes)

    def _syntax(self, pos: int) -> int:
        text, char = self.text, self.text[pos]
        if char == "\\":
            if text[pos + 1 : pos + 2] and text[pos + 1] in ASCII_PUNCTUATION:
                self.nodes.append(text[pos + 1])
                return pos + 2
            self.nodes.append("\\")
            return pos + 1
        if char == "`":
            return self._code_span(pos)
        if char in "*_~":
            return self._delimiter_run(pos)
        if char in "[!":
            self.nodes.append(_Bracket("[" if char == "[" else "!["))
            self.brackets.append(len(self.nodes) - 1)
            return pos + (1 if char == "[" else 2)
        if char == "]":
            return self._close_bracket(pos)
        if char == "<":
            return self._autolink(pos)
        if char == "&":
            return self._entity_reference(pos)
        url = _trim_url(BARE_URL.match(text, pos).group())
        self.nodes.append(url)
        return pos + len(url)

    def _code_span(self, pos: int) -> int:
        run_end = BACKTICKS.match(self.text, pos).end()
        length = run_end - pos
        starts = self.backtick_runs.get(length, [])
        index = bisect_left(starts, run_end)
        if index == len(starts):
            self.nodes.append("`" * length)
            return run_end
        body = self.text[run_end : starts[index]]
        if len(body) > 2 and body[0] == body[-1] == " " and body.strip(" "):
            body = body[1:-1]
        self.nodes.append(_Code(body))
        return starts[index] + length

    def _delimiter_run(self, pos: int) -> int:
        text, char = self.text, self.text[pos]
        end = pos
        while end < len(text) and text[end] == char:
            end += 1
        if char == "~" and end - pos != 2:
            self.nodes.append(text[pos:end])
            return end
        before = text[pos - 1] if pos else " "
        after = text[end] if end < len(text) else " "
        left, right = _flanking(before, after)
        # CommonMark's rule for "_", used for "*" too: no emphasis from inside a word.
        can_open = left and (not right or _is_punctuation(before))
        can_close = right and (not left or _is_punctuation(after))
        self.nodes.append(_Delimiter(char, end - pos, can_open, can_close))
        return end

    def _close_bracket(self, pos: int) -> int:
        if not self.brackets:
            self.nodes.append("]")
            return pos + 1
        index = self.brackets.pop()
        opener = self.nodes[index]
        target = _link_target(self.text, pos + 1) if opener.active else None
        if target is None:
            self.nodes[index] = opener.literal
            self.nodes.append("]")
            return pos + 1
        href, end = target
        children = _resolve_emphasis(self.nodes[index + 1 :])
        del self.nodes[index:]
        if not href.lower().startswith(LINK_SCHEMES):
            # javascript:, relative paths...: shown as written, never as a link.
            self.nodes.extend([opener.literal, *children, self.text[pos:end]])
            return end
        self.nodes.append(_Link(href, children if any(map(_shows_text, children)) else [href]))
        for outer in self.brackets:
            self.nodes[outer].active = False
        return end

    def _entity_reference(self, pos: int) -> int:
        reference = ENTITY_REFERENCE.match(self.text, pos)
        if reference is None:
            self.nodes.append("&")
            return pos + 1
        self.nodes.append(_referenced(reference))
        return reference.end()

    def _autolink(self, pos: int) -> int:
        autolink = AUTOLINK.match(self.text, pos)
        if autolink and autolink.group(1).lower().startswith(LINK_SCHEMES):
            self.nodes.append(_Link(autolink.group(1), [autolink.group(1)]))
            return autolink.end()
        self.nodes.append("<")
        return pos + 1


def _shows_text(node) -> bool:
    return not isinstance(node, str) or bool(node.strip())


def _can_pair(opener: _Delimiter, closer: _Delimiter) -> bool:
    if opener.char != closer.char:
        return False
    # CommonMark's "rule of 3": `*foo**bar*` is not <i>foo</i><i>bar</i>.
    both_ways = opener.can_close or closer.can_open
    sum_of_three = (opener.original + closer.original) % 3 == 0
    return not (both_ways and sum_of_three and (opener.original % 3 or closer.original % 3))


def _resolve_emphasis(nodes: list) -> list:
    """Pair delimiter runs into tags (CommonMark's "process emphasis"); unpaired ones stay text."""
    openers: list[int] = []  # indexes of delimiters that may still open, in order
    bottom: dict[tuple[str, bool, int], int] = {}  # below these indexes no opener fits
    for index, closer in enumerate(nodes):
        if not isinstance(closer, _Delimiter):
            continue
        if closer.can_close:
            key = (closer.char, closer.can_open, closer.original % 3)
            while closer.length:
                found = len(openers) - 1
                while found >= 0 and openers[found] > bottom.get(key, -1):
                    if _can_pair(nodes[openers[found]], closer):
                        break
                    found -= 1
                else:
                    bottom[key] = index - 1
                    break
                opener = nodes[openers[found]]
                used = 2 if opener.length >= 2 and closer.length >= 2 else 1
                tag = "s" if closer.char == "~" else ("b" if used == 2 else "i")
                opener.opens.append(tag)
                closer.closes.append(tag)
                opener.length -= used
                closer.length -= used
                # Delimiters between the pair can no longer open anything.
                del openers[found + 1 :]
                if not opener.length:
                    openers.pop()
        if closer.length and closer.can_open:
            openers.append(index)
    for node in nodes:
        if isinstance(node, _Delimiter):
            node.can_open = node.can_close = False  # settled: an outer pass leaves it alone
    return nodes


class _RunBuilder:
    """Walks resolved nodes with a stack of open formats, emitting runs."""

    def __init__(self, marks: tuple[str, ...]) -> None:
        self.stack: list[tuple[str, bool]] = [(mark, True) for mark in marks]  # (mark, shown)
        self.runs: list[Run] = []

    @property
    def marks(self) -> tuple[str, ...]:
        return tuple(mark for mark, shown in self.stack if shown)

    def open(self, mark: str) -> None:
        # Bold inside bold is one entity to Telegram; the inner tag is not written.
        self.stack.append((mark, tag_name(mark) not in {tag_name(m) for m in self.marks}))

    def add(self, nodes: list) -> None:
        for node in nodes:
            if isinstance(node, str):
                self.runs.append(Run(node, self.marks))
            elif isinstance(node, _Code):
                inside_link = any(tag_name(mark) == "a" for mark in self.marks)
                # Code can't be part of a link: the link wins, its text shown plainly.
                self.runs.append(Run(node.text, self.marks) if inside_link else Run(node.text, code=True))
            elif isinstance(node, _Link):
                self.open(f'a href="{html.escape(node.href, quote=True)}"')
                self.add(node.children)
                self.stack.pop()
            elif isinstance(node, _Delimiter):
                del self.stack[len(self.stack) - len(node.closes) :]
                self.runs.append(Run(node.char * node.length, self.marks))
                for tag in reversed(node.opens):
                    self.open(tag)
            else:
                self.runs.append(Run(node.literal, self.marks))


def inline_runs(text: str, marks: tuple[str, ...] = ()) -> list[Run]:
    """One line of inline Markdown as runs, inside the formats `marks` (a heading's bold)."""
    builder = _RunBuilder(marks)
    builder.add(_InlineParser(text).parse())
    return [run for run in builder.runs if run.text]
