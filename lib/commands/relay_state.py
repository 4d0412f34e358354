"""The heartbeat `ash relay` keeps in $ASH_HOME/relay.json, and how `ash doctor` reads it.

With no public URL, no webhook is registered and Telegram holds updates for the relay to poll;
`ash doctor` used to warn about the missing webhook for ever. The relay writes, after each poll,
its pid, where it delivers and when it last heard from Telegram; the doctor then reports the relay
running (or stopped, and how to start it again) instead.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from lib.db import write_private_text

STATE_FILE = "relay.json"
# A poll returns within its long-poll timeout (50 s) when nothing arrives: older means stopped.
FRESH_SECONDS = 120.0


def beat(home: Path, *, url: str, bot: str | None) -> None:
    """Record that the relay just heard from Telegram (written whole, then moved into place)."""
    state = {"pid": os.getpid(), "url": url, "bot": bot, "polled_at": time.time()}
    temporary = home / f".{STATE_FILE}.{os.getpid()}.tmp"
    write_private_text(temporary, json.dumps(state))
    os.replace(temporary, home / STATE_FILE)


def read(home: Path) -> dict | None:
    """The last heartbeat, or None when no relay ever ran here."""
    try:
        return json.loads((home / STATE_FILE).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None


def running(state: dict, now: float) -> bool:
    """Whether the relay that wrote `state` still runs: it polled within FRESH_SECONDS. (Its pid
    is shown, not checked: under Docker Compose the relay runs in a container of its own.)"""
    try:
        return now - float(state["polled_at"]) <= FRESH_SECONDS
    except (KeyError, ValueError, TypeError):
        return False
