"""Markdown to Telegram HTML, and splitting long answers into messages Telegram accepts."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from lib.telegram.format import MAX_MESSAGE_UNITS, plain, render, utf16_len, visible_text

ALLOWED_TAGS = {"b", "i", "s", "u", "code", "pre", "a"}


class TagChecker(HTMLParser):
    """Fails on tags Telegram does not know and on unbalanced nesting."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []

    def handle_starttag(self, tag, attrs):
        assert tag in ALLOWED_TAGS, tag
        self.stack.append(tag)

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, (self.stack, tag)
        self.stack.pop()


def balanced(fragment: str) -> bool:
    checker = TagChecker()
    checker.feed(fragment)
    checker.close()
    return not checker.stack


def test_inline_markdown_becomes_telegram_html_and_text_is_escaped():
    [html_text] = render(
        "# Plan\n\n**bold** and *italic* and _also_ ~~gone~~, `a<b && c>d`, "
        '[docs](https://example.com/?a=1&b="2")\n- first\n* second\n1. third\n\n5 < 6 & 7 > 3 <script>'
    )
    assert html_text.startswith("<b>Plan</b>\n\n")
    assert "<b>bold</b> and <i>italic</i> and <i>also</i> <s>gone</s>" in html_text
    assert "<code>a&lt;b &amp;&amp; c&gt;d</code>" in html_text
    assert '<a href="https://example.com/?a=1&amp;b=&quot;2&quot;">docs</a>' in html_text
    assert "• first\n• second\n1. third" in html_text
    assert "5 &lt; 6 &amp; 7 &gt; 3 &lt;script&gt;" in html_text
    assert balanced(html_text)


def test_code_block_keeps_its_language_and_formatting_characters():
    [html_text] = render("Run:\n\n```python\nx = 2 ** 3  # *not italic*\nprint(f'{x}<')\n```\nDone.")
    code = "x = 2 ** 3  # *not italic*\nprint(f'{x}&lt;')"
    assert f'<pre><code class="language-python">{code}</code></pre>' in html_text
    assert balanced(html_text)


def test_unsafe_links_and_stray_markers_stay_text():
    [html_text] = render("[click](javascript:alert(1)) and 2*3*4 and snake_case_name and a * b")
    assert "<a" not in html_text
    assert "snake_case_name" in html_text and "2*3*4" in html_text
    assert balanced(html_text)


def test_ten_thousand_character_answer_with_code_block_is_split_correctly():
    intro = "\n\n".join(f"Paragraph {i}: " + "words and more words, " * 12 for i in range(10))
    code = "\n".join(f"    result_{i} = compute({i}, 'x' * {i})  # step {i} <>" for i in range(90))
    outro = "\n\n".join(f"Closing {i}: " + "é ü 🙂 emoji count twice in UTF-16; " * 6 for i in range(12))
    answer = f"{intro}\n\n```python\n{code}\n```\n\n{outro}"
    assert len(answer) >= 10_000

    parts = render(answer)

    assert len(parts) >= 3
    for part in parts:
        assert utf16_len(visible_text(part)) <= MAX_MESSAGE_UNITS
        assert part.count("<pre>") == part.count("</pre>")
        assert part.count("<code") == part.count("</code>")
        assert balanced(part)
    # The code block was cut: closed at the end of one message, reopened with its language.
    cut = [i for i, p in enumerate(parts) if p.rstrip().endswith("</code></pre>") and i + 1 < len(parts)]
    assert any(parts[i + 1].startswith('<pre><code class="language-python">') for i in cut)
    # Nothing lost or duplicated: the visible text of all parts is every line of the answer.
    visible_lines = [line for p in parts for line in visible_text(p).split("\n") if line.strip()]
    expected = [line for line in answer.split("\n") if line.strip() and not line.startswith("```")]
    assert len(visible_lines) == len(expected)
    assert visible_lines[len(intro.split("\n\n"))] == expected[len(intro.split("\n\n"))]
    # Cuts fall between lines: no part starts or ends in the middle of a code line.
    for part in parts:
        for line in visible_text(part).split("\n"):
            assert not line.strip() or any(line == e for e in expected) or line.startswith("Paragraph")


def test_split_prefers_paragraph_breaks_and_never_cuts_a_line():
    paragraphs = [f"P{i} " + "lorem ipsum " * 60 for i in range(12)]
    parts = render("\n\n".join(paragraphs))
    assert len(parts) >= 2
    for part in parts:
        text = visible_text(part)
        assert utf16_len(text) <= MAX_MESSAGE_UNITS
        # Each part starts at a paragraph start.
        assert re.match(r"P\d+ ", text)


def test_one_huge_line_is_cut_at_spaces_within_the_limit():
    line = " ".join(["🙂word"] * 3000)  # emoji are two UTF-16 units each
    parts = render(line)
    assert len(parts) >= 4
    assert all(utf16_len(visible_text(p)) <= MAX_MESSAGE_UNITS for p in parts)
    assert "".join(visible_text(p) for p in parts).replace(" ", "") == line.replace(" ", "")


def test_plain_fallback_has_no_tags():
    [html_text] = render("**Hi** <there> & `code`")
    assert plain(html_text) == "Hi <there> & code"


def test_unclosed_fence_while_streaming_is_still_balanced():
    [html_text] = render("Here:\n```bash\nls -la")
    assert html_text.endswith("</code></pre>")
    assert balanced(html_text)
