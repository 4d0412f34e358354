"""Telegram's rules for message text in HTML parse mode, checked strictly.

The Bot API's "HTML style" (https://core.telegram.org/bots/api#html-style) says:

- "Only the tags mentioned above are currently supported": `<b>`, `<strong>`, `<i>`, `<em>`,
  `<u>`, `<ins>`, `<s>`, `<strike>`, `<del>`, `<span class="tg-spoiler">`, `<tg-spoiler>`,
  `<a href="...">`, `<tg-emoji emoji-id="...">`, `<code>`, `<pre>`,
  `<pre><code class="language-python">`, `<blockquote>` and `<blockquote expandable>`.
- "All <, > and & symbols that are not a part of a tag or an HTML entity must be replaced with
  the corresponding HTML entities (< with &lt;, > with &gt; and & with &amp;)."
- "All numerical HTML entities are supported." and "The API currently supports only the
  following named HTML entities: &lt;, &gt;, &amp; and &quot;."
- "Use nested pre and code tags, to define programming language for pre entity." and
  "Programming language can't be specified for standalone code tags."
- "A valid emoji must be used as the content of the tg-emoji tag."

Its "Formatting options" (https://core.telegram.org/bots/api#formatting-options) say how
entities nest:

- "If two entities have common characters, then one of them is fully contained inside another."
- "bold, italic, underline, strikethrough, and spoiler entities can contain and can be part of
  any other entities, except pre and code."
- "blockquote and expandable_blockquote entities can't be nested."
- "All other entities can't contain each other."

The last rule is read as tdlib (td/telegram/MessageEntity.cpp, the parser behind the Bot API)
applies it: "Pre and Code can't be part of other entities, except blockquote", and a blockquote
may hold a link, but "continuous and blockquote can't be part of other continuous entity" (a
link or custom emoji holds only the styles). A `<code>` inside `<pre>` names the block's
language and must be all of it; without a language it would be a second entity in the first.

Stricter than Telegram where that costs nothing: tag and attribute names in lower case, values
in double quotes, entities closed by ";", no attribute Telegram does not document (it ignores
some), and an `<a>` must have a non-empty href (Telegram would link the text itself).
`message_violation` adds sendMessage's "1-4096 characters after entities parsing" (counted,
like Telegram, in UTF-16 code units; blank text is refused as empty).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_MESSAGE_UNITS = 4096

STYLES = frozenset({"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "span", "tg-spoiler"})
MONOSPACE = frozenset({"code", "pre"})
CONTINUOUS = frozenset({"a", "tg-emoji"})
TAGS = STYLES | MONOSPACE | CONTINUOUS | {"blockquote"}
ATTRIBUTES = {
    "a": {"href"},
    "code": {"class"},
    "span": {"class"},
    "tg-emoji": {"emoji-id"},
    "blockquote": {"expandable"},
}
NAMED_ENTITIES = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}

START_TAG = re.compile(r"<([A-Za-z][A-Za-z0-9-]*)((?:\s+[A-Za-z][A-Za-z0-9-]*(?:=\"[^\"]*\")?)*)\s*>")
END_TAG = re.compile(r"</([A-Za-z][A-Za-z0-9-]*)\s*>")
ATTRIBUTE = re.compile(r"\s+([A-Za-z][A-Za-z0-9-]*)(?:=\"([^\"]*)\")?")
ENTITY = re.compile(r"&(?:#([0-9]{1,7})|#[xX]([0-9A-Fa-f]{1,6})|([A-Za-z][A-Za-z0-9]*));")
# Characters that are not plain text: markup, and surrogates (no UTF-8 encoding exists for them).
SPECIAL = re.compile("[<>&\ud800-\udfff]")
LANGUAGE = re.compile(r"language-([!#-%(-;=?-~]+)")  # printable ASCII, no quotes, & < >


class RuleBroken(Exception):
    """The fragment breaks one of Telegram's HTML rules (the message says which)."""


@dataclass
class _Element:
    name: str
    units_at_start: int
    language: bool = False  # a <code class="language-..."> (only allowed directly in <pre>)
    has_text: bool = False  # for <pre>: text seen directly inside it
    has_code: bool = False  # for <pre>: its <code> seen


def violation(html: str) -> str | None:
    """The first Telegram HTML rule `html` breaks, or None when Telegram accepts it."""
    try:
        _Checker(html).visible_text()
    except RuleBroken as exc:
        return str(exc)
    return None


def message_violation(html: str) -> str | None:
    """Like violation(), and the text after parsing must be 1-4096 UTF-16 units, not all blank."""
    try:
        text = _Checker(html).visible_text()
    except RuleBroken as exc:
        return str(exc)
    if not text.strip():
        return "the message has no visible text"
    units = len(text.encode("utf-16-le")) // 2
    if units > MAX_MESSAGE_UNITS:
        return f"the message's text is {units} UTF-16 units, over {MAX_MESSAGE_UNITS}"
    return None


class _Checker:
    """Walks one fragment once: tags onto a stack, text and entities into the visible text."""

    def __init__(self, html: str) -> None:
        self.html = html
        self.stack: list[_Element] = []
        self.text: list[str] = []
        self.units = 0

    def visible_text(self) -> str:
        html, pos = self.html, 0
        while special := SPECIAL.search(html, pos):
            self._add_text(html[pos : special.start()])
            pos = self._markup(special.start())
        self._add_text(html[pos:])
        if self.stack:
            raise RuleBroken(f"<{self.stack[-1].name}> is never closed")
        return "".join(self.text)

    def _markup(self, pos: int) -> int:
        char = self.html[pos]
        if char == "&":
            decoded, end = _entity(self.html, pos)
            self._add_text(decoded)
            return end
        if char == ">":
            raise RuleBroken(f"unescaped '>' at {pos}")
        if char != "<":
            raise RuleBroken(f"lone UTF-16 surrogate at {pos}")
        if end_tag := END_TAG.match(self.html, pos):
            self._close(_tag_name(end_tag.group(1), pos))
            return end_tag.end()
        if start_tag := START_TAG.match(self.html, pos):
            self._open(_tag_name(start_tag.group(1), pos), _attributes(start_tag.group(2), pos))
            return start_tag.end()
        raise RuleBroken(f"unescaped '<' (or a malformed tag) at {pos}")

    def _add_text(self, text: str) -> None:
        if not text:
            return
        if self.stack and self.stack[-1].name == "pre":
            pre = self.stack[-1]
            if pre.has_code:
                raise RuleBroken("text after the <code> of a <pre>: the <code> must be all of it")
            pre.has_text = True
        self.text.append(text)
        self.units += len(text.encode("utf-16-le", "surrogatepass")) // 2

    def _open(self, name: str, attributes: dict[str, str | None]) -> None:
        if name not in TAGS:
            raise RuleBroken(f"unsupported tag <{name}>")
        _check_attributes(name, attributes)
        element = _Element(name, self.units, language=name == "code" and "class" in attributes)
        parent = self.stack[-1] if self.stack else None
        if name == "code" and parent is not None and parent.name == "pre":
            if not element.language:
                raise RuleBroken('<code> inside <pre> must name a language (class="language-...")')
            if parent.has_text or parent.has_code:
                raise RuleBroken("the <code> inside a <pre> must be all of the <pre>'s content")
            parent.has_code = True
        else:
            self._check_nesting(name)
            if element.language:
                raise RuleBroken("a language is only allowed on a <code> directly inside <pre>")
        self.stack.append(element)

    def _check_nesting(self, name: str) -> None:
        around = {element.name for element in self.stack}
        if around & MONOSPACE:
            raise RuleBroken(f"<{name}> inside <pre>/<code>: they can't contain other entities")
        if name in MONOSPACE and around & (STYLES | CONTINUOUS):
            outer = sorted(around & (STYLES | CONTINUOUS))
            raise RuleBroken(f"<{name}> inside <{outer[0]}>: pre and code can only be inside a blockquote")
        if name in CONTINUOUS | {"blockquote"} and around & CONTINUOUS:
            raise RuleBroken(f"<{name}> inside a link or custom emoji")
        if name == "blockquote" and "blockquote" in around:
            raise RuleBroken("blockquotes can't be nested")

    def _close(self, name: str) -> None:
        if not self.stack:
            raise RuleBroken(f"</{name}> without a start tag")
        element = self.stack.pop()
        if element.name != name:
            raise RuleBroken(f"</{name}> closes <{element.name}>: tags must nest")
        if name == "tg-emoji" and self.units == element.units_at_start:
            raise RuleBroken("<tg-emoji> must hold an emoji")


def _tag_name(name: str, pos: int) -> str:
    if name != name.lower():
        raise RuleBroken(f"tag <{name}> at {pos}: tag names are written in lower case")
    return name


def _attributes(source: str, pos: int) -> dict[str, str | None]:
    attributes: dict[str, str | None] = {}
    for match in ATTRIBUTE.finditer(source):
        name, value = match.group(1), match.group(2)
        if name in attributes:
            raise RuleBroken(f"attribute {name} twice in the tag at {pos}")
        attributes[name] = None if value is None else _attribute_value(value)
    return attributes


def _attribute_value(value: str) -> str:
    """The value with its entities decoded; the same escaping rules as text apply inside it."""
    out, pos = [], 0
    while special := SPECIAL.search(value, pos):
        out.append(value[pos : special.start()])
        if special.group() != "&":
            raise RuleBroken(f"unescaped {special.group()!r} in an attribute value")
        decoded, pos = _entity(value, special.start())
        out.append(decoded)
    out.append(value[pos:])
    return "".join(out)


def _check_attributes(tag: str, attributes: dict[str, str | None]) -> None:
    for name, value in attributes.items():
        if name not in ATTRIBUTES.get(tag, ()):
            raise RuleBroken(f"<{tag}> takes no attribute {name}")
        if name == "expandable" and value is not None:
            raise RuleBroken("<blockquote expandable> takes no value")
        if name != "expandable" and value is None:
            raise RuleBroken(f"<{tag}> attribute {name} needs a value")
    if tag == "a" and not (attributes.get("href") or "").strip():
        raise RuleBroken("<a> needs a non-empty href")
    if tag == "span" and attributes.get("class") != "tg-spoiler":
        raise RuleBroken('<span> is only allowed as <span class="tg-spoiler">')
    if tag == "tg-emoji" and not (attributes.get("emoji-id") or "").isdigit():
        raise RuleBroken("<tg-emoji> needs a numeric emoji-id")
    if tag == "code" and "class" in attributes and not LANGUAGE.fullmatch(attributes["class"] or ""):
        raise RuleBroken('<code> class must be "language-NAME"')


def _entity(text: str, pos: int) -> tuple[str, int]:
    """Decode the entity at `pos`: the character it stands for, and where it ends."""
    match = ENTITY.match(text, pos)
    if match is None:
        raise RuleBroken(f"unescaped '&' at {pos}")
    decimal, hexadecimal, name = match.groups()
    if name is not None:
        if name not in NAMED_ENTITIES:
            raise RuleBroken(f"unsupported named entity &{name}; (only &lt; &gt; &amp; &quot;)")
        return NAMED_ENTITIES[name], match.end()
    code = int(decimal) if decimal is not None else int(hexadecimal, 16)
    if not 0 < code <= 0x10FFFF or 0xD800 <= code <= 0xDFFF:
        raise RuleBroken(f"entity {match.group()} is not a Unicode character")
    return chr(code), match.end()
