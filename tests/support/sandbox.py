"""Finding the real Docker engine and the sandbox image for the `docker`-marked tests.

No engine (or no image): the tests are skipped with the reason, unless CI=true, where a
missing engine fails the run (`.ci/run` starts one through `.ci/docker.sh`).
"""

from __future__ import annotations

import contextlib
import os
import uuid

import pytest

from lib.config import SandboxConfig

IMAGE = SandboxConfig().image


def unavailable(reason: str) -> None:
    """Skip with the reason, or fail when CI promised an engine."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


def engine_client():
    """A docker client for the engine DOCKER_HOST (or the default socket) names, with the image present."""
    import docker

    where = os.environ.get("DOCKER_HOST") or "the default socket"
    try:
        client = docker.from_env(timeout=10)
        client.ping()
    except Exception as exc:
        unavailable(f"no Docker engine answers at {where} ({str(exc)[:120]}); start one with `.ci/docker.sh`")
    try:
        client.images.get(IMAGE)
    except Exception:
        unavailable(f"the sandbox image {IMAGE} is missing at {where}; run `ash sandbox build --offline`")
    return client


def small_config(**overrides) -> SandboxConfig:
    """Small limits so the limit tests run in seconds."""
    values = {"timeout": 3.0, "memory_limit": "64m", "pids_limit": 64, "output_limit": 2000, "idle_timeout": 60.0}
    values.update(overrides)
    return SandboxConfig(**values)


def new_key() -> str:
    """A chat key no other test (or real chat) uses."""
    return f"test-{uuid.uuid4().hex[:12]}"


def cleanup(client, *keys: str) -> None:
    """Remove the test chats' containers and workspaces (volumes and loop devices)."""
    from lib.sandbox.container import Sandbox

    box = Sandbox(SandboxConfig(), client=client)
    for key in keys:
        with contextlib.suppress(Exception):  # already gone
            box.remove_workspace(key)
