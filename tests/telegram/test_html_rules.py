"""The checker of Telegram's HTML rules: the Bot API's own examples pass, each broken rule is named."""

from __future__ import annotations

import pytest

from lib.telegram.html_rules import message_violation, violation

# The "HTML style" examples of https://core.telegram.org/bots/api#html-style, one per line.
DOCUMENTED_EXAMPLES = [
    "<b>bold</b>, <strong>bold</strong>",
    "<i>italic</i>, <em>italic</em>",
    "<u>underline</u>, <ins>underline</ins>",
    "<s>strikethrough</s>, <strike>strikethrough</strike>, <del>strikethrough</del>",
    '<span class="tg-spoiler">spoiler</span>, <tg-spoiler>spoiler</tg-spoiler>',
    "<b>bold <i>italic bold <s>italic bold strikethrough "
    '<span class="tg-spoiler">italic bold strikethrough spoiler</span></s> <u>underline italic bold</u></i> bold</b>',
    '<a href="http://www.example.com/">inline URL</a>',
    '<a href="tg://user?id=123456789">inline mention of a user</a>',
    '<tg-emoji emoji-id="5368324170671202286">👍</tg-emoji>',
    "<code>inline fixed-width code</code>",
    "<pre>pre-formatted fixed-width code block</pre>",
    '<pre><code class="language-python">pre-formatted fixed-width code block written in the Python '
    "programming language</code></pre>",
    "<blockquote>Block quotation started\nBlock quotation continued\nThe last line of the block quotation</blockquote>",
    "<blockquote expandable>Expandable block quotation started\nHidden by default part</blockquote>",
]


@pytest.mark.parametrize("html", DOCUMENTED_EXAMPLES)
def test_the_bot_api_documentation_examples_pass(html):
    assert violation(html) is None


@pytest.mark.parametrize(
    "html",
    [
        "&lt; &gt; &amp; &quot; &#60; &#x3C; &#128578;",
        '<a href="https://example.com/?a=1&amp;b=&quot;2&quot;&amp;c=&#x27;3&#x27;">link</a>',
        '<b>bold <a href="https://example.com">link</a></b>',
        '<a href="https://example.com"><b>bold</b> link</a>',
        "<b>bold </b><code>code</code><b> bold</b>",
        '<blockquote>quote <code>code</code> <a href="https://example.com">link</a></blockquote>',
        '<blockquote><pre><code class="language-sh">ls</code></pre></blockquote>',
        "<b><blockquote>bold can hold a quote</blockquote></b>",
        "<pre>a\n\nb</pre>",
        "🙂 𝔸 👨‍👩‍👧 中文 مرحبا",
        "<b >spaces before the bracket</b >",
    ],
)
def test_what_telegram_documents_as_allowed_passes(html):
    assert violation(html) is None


@pytest.mark.parametrize(
    ("html", "rule"),
    [
        # What issue 14's renderer produced.
        ("<b>bold <code>code</code></b>", "<code> inside <b>"),
        ('<a href="https://example.com"><code>x</code></a>', "<code> inside <a>"),
        # Tags and attributes.
        ("<p>paragraph</p>", "unsupported tag <p>"),
        ("<br>", "unsupported tag <br>"),
        ("<B>bold</B>", "lower case"),
        ("<a>x</a>", "non-empty href"),
        ('<a href=" ">x</a>', "non-empty href"),
        ('<a href="https://example.com" target="_blank">x</a>', "takes no attribute target"),
        ('<b class="x">x</b>', "takes no attribute class"),
        ('<a href="https://a.com" href="https://b.com">x</a>', "attribute href twice"),
        ("<a href='https://example.com'>x</a>", "malformed tag"),
        ("<a href=https://example.com>x</a>", "malformed tag"),
        ("<span>x</span>", 'span class="tg-spoiler"'),
        ('<span class="spoiler">x</span>', 'span class="tg-spoiler"'),
        ("<tg-emoji>👍</tg-emoji>", "numeric emoji-id"),
        ('<tg-emoji emoji-id="5368324170671202286"></tg-emoji>', "must hold an emoji"),
        ('<blockquote expandable="true">x</blockquote>', "takes no value"),
        ('<code class="python">x</code>', "language-NAME"),
        # Balance.
        ("<b>bold", "<b> is never closed"),
        ("bold</b>", "</b> without a start tag"),
        ("<b><i>x</b></i>", "</b> closes <i>"),
        # Nesting.
        ("<code><b>x</b></code>", "inside <pre>/<code>"),
        ('<pre><a href="https://example.com">x</a></pre>', "inside <pre>/<code>"),
        ("<i><pre>x</pre></i>", "<pre> inside <i>"),
        ("<pre><code>x</code></pre>", "must name a language"),
        ('<code class="language-python">x</code>', "directly inside <pre>"),
        ('<pre>x<code class="language-python">y</code></pre>', "all of the <pre>'s content"),
        ('<pre><code class="language-python">x</code>y</pre>', "text after the <code>"),
        ("<blockquote>a<blockquote>b</blockquote></blockquote>", "can't be nested"),
        ('<a href="https://a.com"><a href="https://b.com">x</a></a>', "inside a link"),
        ('<a href="https://a.com"><blockquote>x</blockquote></a>', "inside a link"),
        # Escaping.
        ("a < b", "unescaped '<'"),
        ("a > b", "unescaped '>'"),
        ("AT&T", "unescaped '&'"),
        ("&amp without a semicolon", "unescaped '&'"),
        ("&nbsp;", "unsupported named entity &nbsp;"),
        ("&#xD83D;", "not a Unicode character"),
        ("&#0;", "not a Unicode character"),
        ('<a href="https://example.com/?a=1&b=2">x</a>', "unescaped '&'"),
        ('<a href="https://example.com/<x>">x</a>', "unescaped '<' in an attribute"),
        ("lone \ud83d surrogate", "surrogate"),
    ],
)
def test_each_broken_rule_is_named(html, rule):
    problem = violation(html)
    assert problem is not None and rule in problem, problem


@pytest.mark.parametrize(
    ("html", "rule"),
    [
        ("", "no visible text"),
        ("<b> \n </b>", "no visible text"),
        ("x" * 4097, "4097 UTF-16 units"),
        ("🙂" * 2049, "4098 UTF-16 units"),
        ("<b>broken", "never closed"),
    ],
)
def test_a_message_needs_1_to_4096_units_of_text(html, rule):
    problem = message_violation(html)
    assert problem is not None and rule in problem, problem


def test_length_is_counted_after_parsing_in_utf16_units():
    assert message_violation("x" * 4096) is None
    assert message_violation("🙂" * 2048) is None  # two units each
    assert message_violation("&amp;" * 4096) is None  # an entity is one character
    assert message_violation("<b>" + "x" * 4096 + "</b>") is None  # tags are not text
