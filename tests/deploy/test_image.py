"""What can be checked of the container image on a machine that cannot pull its base image.

- The build context: `docker build` (and `fly deploy`, which uploads it to Fly's builder) sent a
  1.5 GB context holding .venv/ and data/, that is secrets.env (every token and key) and ash.db
  (every conversation). A real Docker engine builds `FROM scratch` + `COPY . /context/` over a
  copy of the checkout planted with those files, with the repository's .dockerignore, and the
  image's files are listed: no secret, database or venv, and everything the Containerfile copies.
- The runtime-only install: every module Ash's code imports comes from a package in the lock's
  runtime part (what the image installs), never from a test-only one.
"""

from __future__ import annotations

import ast
import importlib.metadata
import io
import json
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.support.paths import REPO

PLANTED = {
    "data/secrets.env": "TELEGRAM_BOT_TOKEN=123:secret",
    "data/ash.db": "SQLite format 3",
    "data/ash.db-wal": "wal",
    "data/ash.db.pre-m013-20261127.bak": "backup",
    "data/config.toml": "owner = 1",
    "secrets.env": "OPENAI_API_KEY=sk-secret",
    ".env": "ANTHROPIC_API_KEY=sk-ant-secret",
    "ash.db": "SQLite format 3",
    ".venv/bin/python": "#!",
    ".venv/lib/python3.12/site-packages/big.py": "x = 1",
    "lib/__pycache__/db.cpython-312.pyc": "pyc",
    "lib/stray.db": "SQLite format 3",
    "bench/results/run.json": "{}",
    "notes/keys.txt": "a key someone left here",
}


def checkout(into: Path) -> Path:
    """The repository's tracked files, plus the files a real checkout gathers (PLANTED)."""
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for name in tracked.decode().split("\0"):
        if name and (REPO / name).is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, into / name)
    shutil.copy2(REPO / ".dockerignore", into / ".dockerignore")  # also before it is committed
    for name, text in PLANTED.items():
        (into / name).parent.mkdir(parents=True, exist_ok=True)
        (into / name).write_text(text)
    return into


def copied_sources() -> list[str]:
    """The paths the Containerfile's COPY lines take from the build context."""
    sources = []
    for line in (REPO / "Containerfile").read_text().splitlines():
        words = line.split()
        if words[:1] == ["COPY"] and not any(w.startswith("--from") for w in words):
            sources += [w.rstrip("/") for w in words[1:-1]]
    return sources


@pytest.mark.docker
def test_the_build_context_holds_what_the_image_needs_and_no_secret_database_or_venv(tmp_path, docker_client):
    context = checkout(tmp_path / "checkout")
    (context / "Probe.dockerfile").write_text("FROM scratch\nCOPY . /context/\n")
    # The probe's own file stays in the context whatever .dockerignore says (Docker sends the
    # Dockerfile apart), so it is listed below and ignored.
    image, _ = docker_client.images.build(path=str(context), dockerfile="Probe.dockerfile", rm=True, forcerm=True)
    try:
        saved = io.BytesIO(b"".join(image.save()))
    finally:
        docker_client.images.remove(image.id, force=True)
    files = set()
    with tarfile.open(fileobj=saved) as outer:
        manifest = json.load(outer.extractfile("manifest.json"))
        for layer in manifest[0]["Layers"]:
            with tarfile.open(fileobj=outer.extractfile(layer)) as inner:
                files |= {m.name.removeprefix("context/") for m in inner.getmembers() if m.isfile()}
    files.discard("Probe.dockerfile")

    for planted in PLANTED:
        assert planted not in files, f"{planted} would be uploaded to the builder"
    assert not [f for f in files if f.startswith((".venv/", "data/", "tests/", ".git/"))]
    for source in copied_sources():
        assert source in files or any(f.startswith(source + "/") for f in files), f"COPY {source} would fail"
    assert "lib/db.py" in files and "handlers/health.py" in files


def _runtime_packages() -> set[str]:
    lock = (REPO / "requirements.lock").read_text()
    runtime = lock.split("# local transcription")[0]
    return {
        re.split(r"[=<>;\s]", line)[0].lower().replace("_", "-") for line in runtime.splitlines() if line[:1].isalnum()
    }


def _imported_roots() -> set[str]:
    roots = set()
    paths = [
        REPO / "app.py",
        REPO / "migrate.py",
        *REPO.joinpath("lib").rglob("*.py"),
        *REPO.joinpath("handlers").rglob("*.py"),
    ]
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                roots |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                roots.add(node.module.split(".")[0])
    return roots - set(sys.stdlib_module_names) - {"lib", "handlers", "app", "migrate", "__future__"}


# Offline transcription's packages (the lock's "local transcription" part, an image build option),
# imported only when `[transcription] provider = "local"`.
OPTIONAL = {"faster_whisper", "av"}


def test_every_module_the_code_imports_comes_from_a_runtime_package():
    runtime = _runtime_packages()
    providers = importlib.metadata.packages_distributions()
    missing = {}
    for root in sorted(_imported_roots() - OPTIONAL):
        distributions = {name.lower().replace("_", "-") for name in providers.get(root, [])}
        if not distributions & runtime:
            missing[root] = sorted(distributions) or ["(no installed package provides it)"]
    assert missing == {}, "imported by Ash but not installed by .ci/setup or the image"
