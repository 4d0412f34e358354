"""The architecture as import-linter contracts (pyproject.toml): kept by the tree, broken by a wrong arrow."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO

LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(root: Path, *contracts: str) -> subprocess.CompletedProcess:
    """Run import-linter over the tree at `root` with its own pyproject.toml (only `contracts` if named)."""
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-logo", "--no-cache", *(f"--contract={c}" for c in contracts)],
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the packages and the contracts, to plant forbidden imports in."""
    for package in ("lib", "handlers"):
        shutil.copytree(REPO / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__", "data"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def plant(tree: Path, module: str, line: str) -> None:
    """Add an import to the end of a module of the copied tree."""
    path = tree / module
    path.write_text(path.read_text(encoding="utf-8") + f"\n{line}\n", encoding="utf-8")


def test_the_tree_keeps_every_contract():
    result = lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        # lib importing a handler: the domain must not know HTTP routes.
        ("lib/db.py", "import handlers.health", "layers"),
        # A client that reaches into storage above db.py.
        ("lib/telegram/client.py", "import lib.memory.store", "clients"),
        # Two parts importing each other.
        ("lib/inbox/queue.py", "import lib.inbox.worker", "no-circles"),
        # One handler borrowing from another instead of from lib.
        ("handlers/admin_users.py", "import handlers.admin_memories", "handlers-independent"),
        # Memory calling a model client directly instead of through the function it is given.
        ("lib/memory/extraction.py", "import lib.llm.router", "memory-reaches-models-through-a-function"),
        # A channel reaching past the agent's face into the module behind it.
        ("lib/commands/chat.py", "from lib.agent.turn import run_turn", "agent-face"),
        # The conversation drawing a Telegram keyboard itself instead of returning plain buttons.
        ("lib/conversation/model.py", "from lib.telegram.keyboards import keyboard", "conversation-knows-no-channel"),
        # The conversation reaching for the terminal's channel.
        ("lib/conversation/commands.py", "import lib.commands.chat_session", "conversation-knows-no-channel"),
        # The CLI taking a Telegram module for what the conversation answers.
        ("lib/commands/users.py", "from lib.telegram.chats import admit", "channel-plumbing-only"),
        # An admin route reaching into the Telegram adapter instead of lib.conversation.
        ("handlers/admin_users.py", "import lib.telegram.messages", "channel-plumbing-only"),
        # A tool searching through memory's internals instead of lib/memory/api.py.
        ("lib/tools/memory_tools.py", "from lib.memory.search import retrieval", "memory-search-inside"),
    ],
)
def test_a_planted_forbidden_import_breaks_its_contract(tree, module, line, contract):
    assert lint_imports(tree, contract).returncode == 0  # the copy keeps it before the plant
    plant(tree, module, line)
    result = lint_imports(tree, contract)
    assert result.returncode != 0 and "1 broken" in result.stdout, result.stdout
