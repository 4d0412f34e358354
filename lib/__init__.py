"""Ash: a self-hosted personal assistant for Telegram."""

import sys

# httpx imports its command-line tool (click, rich, pygments: ~70 ms) whenever those are
# installed, and they are (litestar's CLI pulls them in). Ash never uses httpx's CLI; marking
# the module absent makes httpx skip it, as it does when they are missing. Cold start matters:
# it is how long Telegram waits after a deploy or a scale-from-zero.
sys.modules.setdefault("httpx._main", None)
