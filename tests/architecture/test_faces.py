"""A package's face: the names others import from it, each of which must resolve, and which
cost the importer only what it uses (the agent's turn loads with the first turn, not before)."""

from __future__ import annotations

import subprocess
import sys

import lib.agent
from lib.memory import api as memory_api
from tests.support.paths import REPO


def test_every_name_of_the_agents_face_resolves():
    missing = [name for name in lib.agent.__all__ if getattr(lib.agent, name, None) is None]
    assert missing == []
    assert set(lib.agent.LAZY) <= set(lib.agent.__all__)


def test_the_agents_face_loads_only_its_contract_until_a_name_is_used():
    check = (
        "import sys, lib.agent\n"
        "print(sorted(m for m in sys.modules if m.startswith('lib.agent')))\n"
        "lib.agent.run_turn\n"
        "print('lib.agent.turn' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, cwd=REPO, check=True)
    loaded, turn_loaded = result.stdout.splitlines()
    assert loaded == "['lib.agent', 'lib.agent.contract']"
    assert turn_loaded == "True"


def test_every_name_memory_offers_others_resolves():
    assert [name for name in memory_api.__all__ if not callable(getattr(memory_api, name, None))] == []
