"""Create bench/peers/.venv with the seed's stack (FastAPI, uvicorn, aiogram, SQLAlchemy + aiosqlite).

    .venv/bin/python bench/peers/setup_peer.py

Idempotent: does nothing when the venv already imports everything. Uses the registry through pip.
"""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

HERE = Path(__file__).resolve().parent
VENV = HERE / ".venv"
PYTHON = VENV / "bin" / "python"
CHECK = "import fastapi, uvicorn, aiogram, aiosqlite, sqlalchemy.ext.asyncio"


def ready() -> bool:
    """True when the peer's venv imports its whole stack."""
    if not PYTHON.exists():
        return False
    return subprocess.run([str(PYTHON), "-c", CHECK], capture_output=True).returncode == 0


def ensure() -> Path:
    """The peer's python, creating and filling its venv first if needed."""
    if ready():
        return PYTHON
    print(f"installing the peer's stack into {VENV} (one time)", file=sys.stderr)
    venv.EnvBuilder(with_pip=True, clear=False).create(VENV)
    subprocess.run([str(PYTHON), "-m", "pip", "install", "--quiet", "-r", str(HERE / "requirements.txt")], check=True)
    if not ready():
        raise SystemExit("the peer's venv was created but does not import its stack; see pip's output above")
    return PYTHON


if __name__ == "__main__":
    print(ensure())
