"""Shared pieces of the MCP tests: the stub server's path, a free port, waiting for a port."""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

STUB = Path(__file__).with_name("stub_server.py")
PYTHON = sys.executable


def wait_for_port(port: int, timeout: float = 20.0) -> None:
    """Return once something accepts connections on 127.0.0.1:`port`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on port {port} after {timeout} s")
