"""Markdown to Telegram HTML, and splitting long answers into messages Telegram accepts."""

from __future__ import annotations

import logging
import re

import pytest

from lib.telegram.format import MAX_MESSAGE_UNITS, accepted, plain, render, utf16_len, visible_text
from lib.telegram.html_rules import message_violation


def balanced(fragment: str) -> bool:
    """Telegram accepts the fragment as a message (lib/telegram/html_rules.py)."""
    problem = message_violation(fragment)
    assert problem is None, (problem, fragment)
    return True


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


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        # Issue 14: Telegram forbids code inside bold and inside a link.
        ("**bold `code`**", "<b>bold </b><code>code</code>"),
        ("[`x`](https://example.com)", '<a href="https://example.com">x</a>'),
        # Issue 14: the URL's own parentheses belong to it.
        ("[x](https://en.wikipedia.org/wiki/Foo_(bar))", '<a href="https://en.wikipedia.org/wiki/Foo_(bar)">x</a>'),
        # Issue 14: three markers are bold inside italic, none left over.
        ("***x***", "<i><b>x</b></i>"),
        ("__x__", "<b>x</b>"),
        ("*a **b** c*", "<i>a <b>b</b> c</i>"),
        ("**a **b** c**", "<b>a b c</b>"),
        ("*italic `code` italic*", "<i>italic </i><code>code</code><i> italic</i>"),
        ("**[`x`](https://example.com) y**", '<b><a href="https://example.com">x</a> y</b>'),
        (
            "# Use `pip` from [PyPI](https://pypi.org)",
            '<b>Use </b><code>pip</code><b> from <a href="https://pypi.org">PyPI</a></b>',
        ),
        ("<https://example.com/a_b_c>", '<a href="https://example.com/a_b_c">https://example.com/a_b_c</a>'),
    ],
)
def test_nested_markdown_becomes_html_telegram_accepts_with_the_same_meaning(markdown, expected):
    [html_text] = render(markdown)
    assert html_text == expected
    assert balanced(html_text)


def test_underscores_in_words_and_urls_and_stars_in_math_stay_literal():
    text = "snake_case_name, https://example.com/some_path/_private_/x_y and 2*3*4 or x**2 + y**2"
    assert render(text) == [text]


def test_unclosed_markers_stay_text():
    text = "**bold and `code and [link](https://example.com and ~~gone"
    [html_text] = render(text)
    assert visible_text(html_text) == text


def test_escapes_and_entity_references_read_as_in_commonmark():
    assert render(r"\*not italic\* &amp; &copy; &bogus; 5 < 6") == ["*not italic* &amp; © &amp;bogus; 5 &lt; 6"]


def test_code_block_without_a_language_is_a_bare_pre():
    # <pre><code> without a language would be two entities, one inside the other.
    assert render("```\nx < 1\n```") == ["<pre>x &lt; 1</pre>"]


def test_quote_lines_become_one_blockquote_even_when_nested():
    [html_text] = render("> said **this**\n>> and `that`\n\nreply")
    assert html_text == "<blockquote>said <b>this</b>\nand <code>that</code></blockquote>\n\nreply"


def test_a_table_keeps_its_rows_without_the_delimiter_row():
    [html_text] = render("| Name | `Value` |\n|:-----|------:|\n| a | **1** |")
    assert html_text == "<b>Name</b> | <code>Value</code>\na | <b>1</b>"


def test_carriage_returns_and_lone_surrogates_are_cleaned():
    [html_text] = render("a\r\nb\rc \ud83d")
    assert html_text == "a\nb\nc \ufffd"
    assert balanced(html_text)


def test_a_long_formatted_line_is_cut_with_its_formatting_on_both_sides():
    parts = render("**" + "bold words " * 1000 + "end**")
    assert len(parts) >= 3
    for part in parts:
        assert part.startswith("<b>") and part.endswith("</b>")
        assert utf16_len(visible_text(part)) <= MAX_MESSAGE_UNITS
        assert balanced(part)


def test_a_quotation_cut_in_two_is_closed_and_reopened():
    parts = render("\n".join(f"> line {i} with *words*" for i in range(400)))
    assert len(parts) >= 2
    for part in parts:
        assert part.startswith("<blockquote>") and part.endswith("</blockquote>")
        assert balanced(part)


def test_html_breaking_telegrams_rules_goes_out_as_escaped_text(caplog):
    with caplog.at_level(logging.WARNING, logger="ash.telegram"):
        assert accepted("<b>bold <code>a &lt; b</code></b>") == "bold a &lt; b"
    assert "<code> inside <b>" in caplog.text
    assert accepted("<b>bold</b> <code>a &lt; b</code>") == "<b>bold</b> <code>a &lt; b</code>"
