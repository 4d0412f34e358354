"""Shared pieces of the MCP tests: the stub server's path, a free port, waiting for a port."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.support.faults import ASH, server_env

STUB = Path(__file__).with_name("stub_server.py")
PYTHON = sys.executable


def ash(home: Path, *args: str) -> str:
    """Run an `ash` command against this home; its stdout."""
    env = server_env(home, None)
    done = subprocess.run([str(ASH), *args], env=env, capture_output=True, text=True, timeout=120, check=True)
    return done.stdout


def new_token(home: Path, user: str, *extra: str) -> str:
    """`ash mcp token create`; the token is alone on the last line."""
    return ash(home, "mcp", "token", "create", "--user", user, *extra).strip().splitlines()[-1]


def wait_for_port(port: int, proc: subprocess.Popen | None = None, timeout: float = 120.0) -> None:
    """Return once something accepts connections on 127.0.0.1:`port`; fail at once if `proc` exits.

    The timeout is a ceiling for a stuck server, not a measure: a cold `import mcp` alone takes
    3.4 s on a busy 2-core machine."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the server on port {port} exited with {proc.returncode} before listening")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on port {port} after {timeout} s")
