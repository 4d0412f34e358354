"""sha256 of files: the pinned model weights and engines Ash loads from packages it did not build."""

from __future__ import annotations

import hashlib
from pathlib import Path

BLOCK = 1 << 20


def file_sha256(path: Path) -> str:
    """The hex sha256 of a file, read a megabyte at a time."""
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while block := file.read(BLOCK):
            digest.update(block)
    return digest.hexdigest()
