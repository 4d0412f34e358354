"""The model's Markdown as Telegram HTML, split into messages Telegram accepts.

Telegram's HTML mode knows b, i, s, u, code, pre (with a language class) and a href; lists
and headings become plain text. A message's visible text (tags removed, entities counted as
one character) may hold at most 4096 UTF-16 code units
(https://core.telegram.org/bots/api#sendmessage), so long answers are split on paragraph or
line boundaries, and a code block cut in two is closed and reopened.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

MAX_MESSAGE_UNITS = 4096

FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w+#.-]*)\s*$")
HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
BULLET = re.compile(r"^(\s*)[-*+]\s+(.*)$")
RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
TAG = re.compile(r"<[^>]*>")

# Inline spans, tried left to right; code first so nothing inside it is formatted.
INLINE = re.compile(
    r"(?P<code>`+)(?P<code_body>.+?)(?P=code)"
    r"|\[(?P<link_text>[^\]\n]+)\]\((?P<link_url>[^)\s]+)\)"
    r"|\*\*(?P<bold>\S(?:.*?\S)?)\*\*"
    r"|__(?P<bold2>\S(?:.*?\S)?)__"
    r"|~~(?P<strike>\S(?:.*?\S)?)~~"
    r"|(?<![\w*])\*(?P<italic>[^\s*](?:[^*]*?[^\s*])?)\*(?![\w*])"
    r"|(?<![\w_])_(?P<italic2>[^\s_](?:[^_]*?[^\s_])?)_(?![\w_])"
)


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, the unit Telegram counts in."""
    return len(text.encode("utf-16-le")) // 2


def visible_text(fragment: str) -> str:
    """What a user sees of a Telegram HTML fragment: tags removed, entities decoded."""
    return html.unescape(TAG.sub("", fragment))


def _escape(text: str) -> str:
    return html.escape(text, quote=False)


def render_inline(text: str) -> str:
    """One line of Markdown inline syntax as Telegram HTML, everything else escaped."""
    out: list[str] = []
    pos = 0
    for match in INLINE.finditer(text):
        out.append(_escape(text[pos : match.start()]))
        pos = match.end()
        groups = match.groupdict()
        if groups["code"]:
            out.append(f"<code>{_escape(groups['code_body'].strip())}</code>")
        elif groups["link_text"]:
            url = groups["link_url"]
            if url.lower().startswith(("http://", "https://", "tg://", "mailto:")):
                out.append(f'<a href="{html.escape(url, quote=True)}">{render_inline(groups["link_text"])}</a>')
            else:
                out.append(_escape(match.group(0)))
        elif groups["bold"] or groups["bold2"]:
            out.append(f"<b>{render_inline(groups['bold'] or groups['bold2'])}</b>")
        elif groups["strike"]:
            out.append(f"<s>{render_inline(groups['strike'])}</s>")
        else:
            out.append(f"<i>{render_inline(groups['italic'] or groups['italic2'])}</i>")
    out.append(_escape(text[pos:]))
    return "".join(out)


@dataclass(frozen=True)
class Line:
    """One rendered line: its HTML, and the code block it sits in (None outside code)."""

    html: str
    code_lang: str | None = None

    @property
    def units(self) -> int:
        return utf16_len(visible_text(self.html))


def render_lines(markdown: str) -> list[Line]:
    """Render Markdown line by line; an unclosed fence (a stream cut short) stays code."""
    lines: list[Line] = []
    lang: str | None = None
    fence = ""
    for raw in markdown.replace("\r\n", "\n").split("\n"):
        opened = FENCE.match(raw)
        if lang is None and opened:
            fence, lang = opened.group(1), opened.group(2)
            continue
        if lang is not None:
            if opened and opened.group(1).startswith(fence[0]) and len(opened.group(1)) >= len(fence):
                lang = None
                continue
            lines.append(Line(_escape(raw), lang))
            continue
        if heading := HEADING.match(raw):
            lines.append(Line(f"<b>{render_inline(heading.group(1))}</b>"))
        elif RULE.match(raw):
            lines.append(Line("──────────"))
        elif bullet := BULLET.match(raw):
            lines.append(Line(f"{bullet.group(1)}• {render_inline(bullet.group(2))}"))
        else:
            lines.append(Line(render_inline(raw)))
    return lines


def _open_pre(lang: str) -> str:
    return f'<pre><code class="language-{html.escape(lang, quote=True)}">' if lang else "<pre><code>"


def _join(lines: list[Line]) -> str:
    """HTML for consecutive lines joined by newlines, code lines wrapped in pre blocks."""
    out: list[str] = []
    current: str | None = None
    for index, line in enumerate(lines):
        if line.code_lang != current:
            if current is not None:
                out.append("</code></pre>")
            if index:
                out.append("\n")
            if line.code_lang is not None:
                out.append(_open_pre(line.code_lang))
            current = line.code_lang
        elif index:
            out.append("\n")
        out.append(line.html)
    if current is not None:
        out.append("</code></pre>")
    return "".join(out)


def _cut_long(line: Line, limit: int) -> list[Line]:
    """Split one line that alone is over the limit, at spaces when possible."""
    text = visible_text(line.html)
    pieces: list[Line] = []
    while utf16_len(text) > limit:
        # Find the largest prefix within the limit, counting surrogate pairs as two.
        end, units = 0, 0
        for i, ch in enumerate(text):
            units += 2 if ord(ch) > 0xFFFF else 1
            if units > limit:
                break
            end = i + 1
        space = text.rfind(" ", 0, end)
        cut = space + 1 if space > end // 2 else end
        pieces.append(Line(_escape(text[:cut]), line.code_lang))
        text = text[cut:]
    pieces.append(Line(_escape(text), line.code_lang))
    return pieces


def _visible_units(lines: list[Line]) -> int:
    return sum(line.units for line in lines) + max(len(lines) - 1, 0)


def _is_blank(line: Line) -> bool:
    return line.code_lang is None and not line.html.strip()


def _trim(lines: list[Line]) -> list[Line]:
    """Drop blank lines at either end of a message."""
    start, end = 0, len(lines)
    while start < end and _is_blank(lines[start]):
        start += 1
    while end > start and _is_blank(lines[end - 1]):
        end -= 1
    return lines[start:end]


def split_html(lines: list[Line], limit: int = MAX_MESSAGE_UNITS) -> list[str]:
    """Pack rendered lines into messages of at most `limit` visible UTF-16 units each.

    A message ends at the last blank line (a paragraph break) when that keeps it at least half
    full, else after the last line that fits; a code block crossing the cut is closed at the
    end of one message and reopened at the start of the next.
    """
    queue: list[Line] = []
    for line in lines:
        queue.extend(_cut_long(line, limit) if line.units > limit else [line])
    parts: list[list[Line]] = []
    current: list[Line] = []
    for line in queue:
        while current and _visible_units([*current, line]) > limit:
            keep = len(current)
            blank = max((i for i, kept in enumerate(current) if _is_blank(kept)), default=-1)
            if blank > 0 and _visible_units(current[:blank]) >= limit // 2:
                keep = blank
            parts.append(current[:keep])
            current = _trim(current[keep:])
        current.append(line)
    parts.append(current)
    rendered = [_join(_trim(part)) for part in parts]
    return [part for part in rendered if visible_text(part).strip()]


def render(markdown: str, limit: int = MAX_MESSAGE_UNITS) -> list[str]:
    """The model's Markdown as one or more Telegram HTML messages."""
    return split_html(render_lines(markdown.strip("\n")), limit)


def plain(fragment: str) -> str:
    """The same message as plain text, for the retry after a parse error."""
    return visible_text(fragment)
