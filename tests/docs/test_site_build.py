"""The guide's tooling: built by .ci/run with the test tools, never shipped in the image."""

from __future__ import annotations

import tomllib

from tests.support.paths import REPO


def _lock_sections() -> tuple[list[str], list[str]]:
    lines = (REPO / "requirements.lock").read_text().splitlines()
    test = next(i for i, line in enumerate(lines) if line.startswith("# test dependencies"))
    return lines[:test], lines[test:]


def test_mkdocs_material_is_a_test_tool_only():
    image_and_runtime, test = _lock_sections()
    assert any(line.startswith("mkdocs-material==") for line in test)
    assert not [line for line in image_and_runtime if line.lower().startswith(("mkdocs", "pymdown", "markdown=="))]
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert "mkdocs-material" in project["optional-dependencies"]["test"]
    assert not [dep for dep in project["dependencies"] if dep.startswith("mkdocs")]


def test_ci_builds_the_guide_strictly_and_offline():
    run = (REPO / ".ci" / "run").read_text()
    assert ".venv/bin/mkdocs build --strict" in run
    config = (REPO / "mkdocs.yml").read_text()
    assert "font: false" in config, "the theme would fetch web fonts from Google"
    for fetching in ("social", "privacy", "blog", "projects"):
        assert f"- {fetching}" not in config
