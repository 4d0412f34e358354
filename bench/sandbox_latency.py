"""Sandbox command latency: warm container per chat vs one container per command.

Usage: DOCKER_HOST=... .venv/bin/python bench/sandbox_latency.py [--runs 20] [--image ash-sandbox:latest]

Prints p50/p95/min of wall-clock time for `true` (and for a short Python command when the
image has python3) measured three ways, all with the same limits (lib.sandbox.layout.container_options):
  warm      exec in the chat's running container (what Ash does for every command but the first)
  cold      the first command of a chat: create + start the warm container, then exec
  oneshot   one container per command: create, start, wait, read logs, remove
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
import uuid

from lib.config import SandboxConfig
from lib.sandbox.container import Sandbox
from lib.sandbox.engine import connect
from lib.sandbox.layout import container_name, container_options, volume_name
from lib.sandbox.scripts import COMMAND_WRAPPER


def summary(name: str, samples: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    return f"{name:<8} n={len(ms):<3} p50 {statistics.median(ms):7.1f} ms   p95 {p95:7.1f} ms   min {ms[0]:7.1f} ms"


def cleanup(client, *keys: str) -> None:
    """Remove the benchmark chats' containers and volumes."""
    import docker.errors

    for key in keys:
        with contextlib.suppress(docker.errors.NotFound):
            client.api.remove_container(container_name(key), force=True)
            client.api.wait(container_name(key), condition="removed", timeout=15)
        with contextlib.suppress(docker.errors.NotFound):
            client.api.remove_volume(volume_name(key), force=True)


def oneshot(client, config: SandboxConfig, key: str, command: str) -> bytes:
    """The per-command alternative: a fresh container for this one command."""
    options = container_options(config, key, ["/bin/sh", "-c", COMMAND_WRAPPER, "sh", command])
    container = client.containers.create(**options)
    try:
        container.start()
        container.wait(timeout=config.timeout)
        return container.logs()
    finally:
        container.remove(force=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--image", default=SandboxConfig().image)
    args = parser.parse_args()
    config = SandboxConfig(image=args.image)
    client = connect(timeout=120)
    version = client.version()
    print(f"Docker {version['Version']} (API {version['ApiVersion']}), image {args.image}, {args.runs} runs each")
    sandbox = Sandbox(config, client=client)
    commands = ["true"]
    probe_key = f"bench-{uuid.uuid4().hex[:8]}"
    if sandbox.run_sync(probe_key, "command -v python3").exit_code == 0:
        commands.append("python3 -c 'print(1)'")
    keys = [probe_key]
    try:
        for command in commands:
            print(f"\ncommand: {command}")
            warm = []
            for _ in range(args.runs):
                started = time.perf_counter()
                sandbox.run_sync(probe_key, command)
                warm.append(time.perf_counter() - started)
            cold = []
            for _ in range(max(3, args.runs // 4)):
                key = f"bench-{uuid.uuid4().hex[:8]}"
                keys.append(key)
                started = time.perf_counter()
                sandbox.run_sync(key, command)
                cold.append(time.perf_counter() - started)
            once = []
            for _ in range(max(3, args.runs // 2)):
                started = time.perf_counter()
                oneshot(client, config, probe_key, command)
                once.append(time.perf_counter() - started)
            for name, samples in (("warm", warm), ("cold", cold), ("oneshot", once)):
                print(summary(name, samples))
    finally:
        cleanup(client, *keys)
        client.close()


if __name__ == "__main__":
    main()
