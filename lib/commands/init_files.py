"""The two files `ash init` writes: config.toml, edited key by key so everything else in it stays as
written (comments, order, keys init never touches), and secrets.env, created 0600."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

from lib.config import Config, parse_config
from lib.config.environment import read_env_file
from lib.db import make_private_dir

NEW_CONFIG_HEADER = (
    "# Ash's configuration, written by `ash init` (run it again to change these).\n"
    "# Every key, with its default, is documented in config.example.toml; secrets live in secrets.env.\n"
)
SECRETS_HEADER = (
    "# Ash's secrets, written by `ash init`. Keep this file private (it is created 0600) and out of git.\n"
    "# Load it into the shell that runs `ash serve` or `ash relay`:  set -a; . <this file>; set +a\n"
)
_HEADER = re.compile(r"\s*\[([^\[\]]+)\]\s*(#.*)?$")
_NAME = re.compile(r"[A-Z][A-Z0-9_]*")
# Values every shell and `fly secrets import` read alike when written bare (all real tokens are).
_BARE = re.compile(r"[A-Za-z0-9_:.,/+=@-]+")


def _toml_value(value: str | int) -> str:
    # JSON's string escapes are valid in a TOML basic string.
    return str(value) if isinstance(value, int) else json.dumps(value)


def _section_bounds(lines: list[str], section: str | None) -> tuple[int, int] | None:
    """(first line, end) of a table's key lines; the top level before any table for None."""
    start = 0 if section is None else None
    for number, line in enumerate(lines):
        header = _HEADER.match(line)
        if header is None:
            continue
        if start is not None:
            return start, number
        if header.group(1).strip() == section:
            start = number + 1
    return None if start is None else (start, len(lines))


def set_key(text: str, section: str | None, key: str, value: str | int) -> str:
    """`text` with `key` in `[section]` (None: the top level) set to `value`: its line replaced,
    else added at the end of the table, else the table added at the end of the file."""
    lines = text.splitlines()
    line = f"{key} = {_toml_value(value)}"
    bounds = _section_bounds(lines, section)
    if bounds is None:
        return "\n".join([*lines, "", f"[{section}]", line]).lstrip("\n") + "\n"
    start, end = bounds
    pattern = re.compile(rf"\s*{re.escape(key)}\s*=")
    for number in range(start, end):
        if pattern.match(lines[number]):
            lines[number] = line
            return "\n".join(lines) + "\n"
    last = max((n for n in range(start, end) if lines[n].strip()), default=start - 1)
    lines.insert(last + 1, line)
    return "\n".join(lines) + "\n"


def update_config(path: Path, changes: dict[tuple[str | None, str], str | int]) -> Config:
    """Write `changes` ((section, key) -> value) into the config file, creating it if needed;
    the result is parsed before it replaces the file, so a bad value never reaches the disk."""
    text = path.read_text(encoding="utf-8") if path.is_file() else NEW_CONFIG_HEADER
    for (section, key), value in changes.items():
        text = set_key(text, section, key, value)
    config = parse_config(text, path)
    make_private_dir(path.parent)
    path.write_text(text, encoding="utf-8")
    return config


def read_secrets(path: Path) -> dict[str, str]:
    """NAME=VALUE lines of a secrets file (as the server reads it: lib/config/environment.py)."""
    return read_env_file(path)


def write_secrets(path: Path, values: dict[str, str]) -> None:
    """Replace the secrets file with `values`, readable by its owner only (0600) from the first byte."""
    body = SECRETS_HEADER + "".join(
        f"{name}={value if _BARE.fullmatch(value) else shlex.quote(value)}\n" for name, value in values.items()
    )
    make_private_dir(path.parent)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temporary)  # a leftover could carry looser permissions; O_EXCL makes a fresh one
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(body)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)


@contextlib.contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """This process's environment with `values` added, as if secrets.env were loaded; restored after."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
