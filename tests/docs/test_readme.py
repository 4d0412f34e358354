"""The README is the front page: the two quick-start commands are in it, and the test command is
exactly what .ci/run runs, so CI checks what a newcomer is told to run."""

from __future__ import annotations

import re

from tests.support.paths import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")


def _ci_test_command() -> str:
    lines = (REPO / ".ci" / "run").read_text().splitlines()
    marker = lines.index("# The README's test command:")
    return lines[marker + 1].strip()


def test_the_readme_test_command_is_what_ci_runs():
    command = _ci_test_command()
    assert command.endswith(".venv/bin/pytest")
    assert f"```sh\n{command}\n```" in README, "the README's quick start shows the command .ci/run runs"


def test_the_readme_run_command_serves_ash():
    assert "```sh\n.ci/setup && .venv/bin/ash serve\n```" in README


def _github_anchors(text: str) -> set[str]:
    """The anchors GitHub gives the README's headings (a repeated one gets -1, -2, ...)."""
    anchors: set[str] = set()
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and (found := re.match(r"#{1,6} (.*)", line)):
            slug = re.sub(r"[^\w\- ]", "", found[1].replace("`", "").strip().lower()).replace(" ", "-")
            anchor, n = slug, 0
            while anchor in anchors:
                n += 1
                anchor = f"{slug}-{n}"
            anchors.add(anchor)
    return anchors


def _prose(text: str) -> str:
    """The text without code blocks and code spans, where `[a](b)` is not a link."""
    return re.sub(r"`[^`\n]*`", "", re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL))


def test_the_readme_links_lead_somewhere():
    anchors = _github_anchors(README)
    for target in re.findall(r"\]\(([^)\s]+)\)", _prose(README)):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        if path:
            assert (REPO / path).exists(), f"README links to {path}, which is not in the repository"
        else:
            assert anchor in anchors, f"README links to #{anchor}, which no heading has"
