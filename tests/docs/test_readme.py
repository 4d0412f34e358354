"""The README is the front page: the two quick-start commands are in it, and the test command is
exactly what .ci/run runs, so CI checks what a newcomer is told to run."""

from __future__ import annotations

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
