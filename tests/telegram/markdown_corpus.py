"""The Markdown corpus the Telegram renderer is checked against.

tests/fixtures/markdown/cases.md holds hand-written cases; generated.md holds combinations of
emphasis, content and context, and seeded mixes of them, written by this module:

    .venv/bin/python -m tests.telegram.markdown_corpus

Each case starts with a line `%%% name`; its Markdown runs to the next such line.
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path

from tests.support.paths import FIXTURES

CORPUS = FIXTURES / "markdown"
HAND_WRITTEN = CORPUS / "cases.md"
GENERATED = CORPUS / "generated.md"
CASE_HEADER = "%%% "

WRAPPERS = ["*{}*", "_{}_", "**{}**", "__{}__", "***{}***", "~~{}~~", "**{}"]
CONTENTS = [
    "word",
    "`code`",
    "text `code` text",
    "[link](https://example.com/a_b)",
    "[`code link`](https://example.com)",
    "[wiki](https://en.wikipedia.org/wiki/Foo_(bar))",
    "https://example.com/snake_case_(x)",
    "snake_case_name",
    "a < b & c > d",
    "*nested* and **nested**",
]
CONTEXTS = {
    "text": "before {} after",
    "list item": "- {}",
    "heading": "## {}",
    "quote": "> {}",
    "table": "| {} | `x` |\n|---|---|\n| {} | y |",
}
# Pieces a mixed line or answer is drawn from.
FRAGMENTS = [
    *(wrapper.format(content) for wrapper in WRAPPERS for content in CONTENTS[:6]),
    "plain words",
    "🙂 emoji 🇺🇸",
    "𝔸 astral",
    "2*3*4",
    "x**2",
    "__init__",
    "&amp; <tag>",
    "\\*escaped\\*",
    "<https://example.com/a_b>",
    "[unsafe](javascript:alert(1))",
    "**unclosed",
    "`unclosed",
]
BLOCKS = ["{}", "- {}", "1. {}", "# {}", "> {}", "```python\n{}\n```", "```\n{}\n```"]


def load(path: Path) -> list[tuple[str, str]]:
    """The (name, markdown) cases of one corpus file."""
    cases: list[tuple[str, list[str]]] = []
    for line in path.read_text(encoding="utf-8").split("\n"):
        if line.startswith(CASE_HEADER):
            cases.append((line.removeprefix(CASE_HEADER), []))
        elif cases:
            cases[-1][1].append(line)
    return [(name, "\n".join(lines).rstrip("\n")) for name, lines in cases]


def all_cases() -> list[tuple[str, str]]:
    """Every case of the committed corpus, hand-written first."""
    return load(HAND_WRITTEN) + load(GENERATED)


def generated_cases() -> list[tuple[str, str]]:
    """Every emphasis around every content in every context, then seeded mixes of fragments."""
    cases = [
        (f"{label}: {body}", CONTEXTS[label].format(body, body))
        for label, wrapper, content in itertools.product(CONTEXTS, WRAPPERS, CONTENTS)
        for body in [wrapper.format(content)]
    ]
    rng = random.Random(14)
    for number in range(60):
        lines = [
            rng.choice(BLOCKS).format(" ".join(rng.sample(FRAGMENTS, rng.randint(2, 5))))
            for _ in range(rng.randint(1, 6))
        ]
        cases.append((f"mixed answer {number}", "\n".join(lines)))
    return cases


def generated_text() -> str:
    """generated.md as this module writes it."""
    return "".join(f"{CASE_HEADER}{name}\n{markdown}\n" for name, markdown in generated_cases())


if __name__ == "__main__":
    GENERATED.write_text(generated_text(), encoding="utf-8")
