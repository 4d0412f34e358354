"""This test process's children, read from /proc: which parser processes run, and whether one is gone."""

from __future__ import annotations

import os
from pathlib import Path

PARSER = b"lib.senses.parser_process"


def parser_processes() -> set[int]:
    """Pids of the parser processes (lib/senses/parser_process.py) this process started and that
    still exist (a zombie not yet reaped included: its cmdline is empty, so it is matched by pid
    in `gone` instead)."""
    me = os.getpid()
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if parent == me and PARSER in (entry / "cmdline").read_bytes():
                found.add(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue  # it ended while we looked
    return found


def environment(pid: int) -> set[str]:
    """The names of a process's environment variables."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return set()
    return {item.split(b"=", 1)[0].decode() for item in raw.split(b"\0") if item}


def gone(pid: int) -> bool:
    """True when no process (not even a zombie waiting to be reaped) has this pid."""
    return not Path(f"/proc/{pid}").exists()
