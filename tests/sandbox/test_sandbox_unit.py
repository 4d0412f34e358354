"""Sandbox pieces that need no engine: output capping, container options, an unreachable engine."""

from __future__ import annotations

import asyncio
import threading

from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from lib.commands.cli import cli
from lib.config import SandboxConfig
from lib.sandbox.image import SANDBOX_ENV
from lib.sandbox.layout import chat_key, container_options, parse_bytes, volume_name
from lib.sandbox.output import OutputCap
from lib.tools.base import ToolContext
from lib.tools.bash import BashInput, BashTool

DEAD_SOCKET = "unix:///nonexistent/ash-test/docker.sock"


@given(chunks=st.lists(st.binary(max_size=300), max_size=30), limit=st.integers(min_value=2, max_value=1000))
def test_output_cap_keeps_head_and_tail_and_counts_the_cut(chunks, limit):
    cap = OutputCap(limit)
    for chunk in chunks:
        cap.feed(chunk)
    full = b"".join(chunks)
    text = cap.text()
    assert cap.total == len(full)
    if len(full) <= limit:
        assert not cap.truncated
        assert text == full.decode("utf-8", "replace")
        return
    head, keep = limit // 2, limit - limit // 2
    cut = len(full) - head - keep
    assert cap.truncated
    assert text.startswith(full[:head].decode("utf-8", "replace"))
    assert text.endswith(full[-keep:].decode("utf-8", "replace"))
    assert f"[... {cut} bytes of output cut; first and last {keep} bytes kept ...]" in text


def test_output_cap_memory_stays_bounded():
    cap = OutputCap(100)
    for _ in range(10_000):
        cap.feed(b"x" * 1000)
    assert cap.total == 10_000_000
    assert len(cap.head) + cap.tail_size < 2_000


def test_container_options_lock_everything_down(monkeypatch):
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "123:secret")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret")
    options = container_options(SandboxConfig(memory_limit="256m", cpu_limit=0.5, pids_limit=50), "telegram-7", ["sh"])
    assert options["environment"] == SANDBOX_ENV
    assert "TELEGRAM_BOT_TOKEN" not in options["environment"] and "ANTHROPIC_API_KEY" not in options["environment"]
    assert options["mem_limit"] == options["memswap_limit"] == 256 * 1024 * 1024
    assert options["nano_cpus"] == 500_000_000
    assert options["pids_limit"] == 50
    assert options["read_only"] is True
    assert options["tmpfs"] == {"/tmp": "rw,nosuid,nodev,size=64m,mode=1777"}
    assert options["cap_drop"] == ["ALL"]
    assert options["security_opt"] == ["no-new-privileges"]
    assert options["user"] == "1000:1000"
    assert options["network_mode"] == "none" and options["network_disabled"] is True
    # The chat's own volume is the only mount; never the Docker socket.
    assert [(m["Source"], m["Target"]) for m in options["mounts"]] == [(volume_name("telegram-7"), "/workspace")]
    assert "volumes" not in options and "docker.sock" not in repr(options)


def test_network_can_be_allowed_by_config():
    options = container_options(SandboxConfig(network_disabled=False), "k", ["sh"])
    assert "network_mode" not in options and "network_disabled" not in options


def test_sizes_and_chat_keys():
    assert parse_bytes("512m") == 512 * 1024**2
    assert parse_bytes("1g") == 1024**3
    assert parse_bytes("1.5k") == 1536
    assert chat_key("telegram", -1001234) == "telegram--1001234"
    assert chat_key("x", "a/b c") == "x-a_b_c"


def test_unreachable_engine_is_a_clear_error_for_the_model(settings, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", DEAD_SOCKET)
    context = ToolContext(user_id="1", chat_id="1", session_id=None, settings=settings)
    result = asyncio.run(BashTool().execute(BashInput(command="echo hi"), context))
    assert result.is_error
    assert result.output.startswith("The sandbox is unavailable: cannot reach the Docker engine")
    assert "DOCKER_HOST" in result.output


def test_empty_command_is_refused(settings):
    context = ToolContext(user_id="1", chat_id="1", session_id=None, settings=settings)
    result = asyncio.run(BashTool().execute(BashInput(command="   "), context))
    assert result.is_error and "empty command" in result.output


def test_cli_and_doctor_explain_an_unreachable_engine(ash_home, monkeypatch):
    from lib.commands.doctor_remote import check_sandbox
    from lib.config import load_settings

    monkeypatch.setenv("DOCKER_HOST", DEAD_SOCKET)
    result = CliRunner().invoke(cli, ["sandbox", "status"])
    assert result.exit_code == 1
    assert "cannot reach the Docker engine" in result.output

    (ash_home / "config.toml").write_text("[sandbox]\nenabled = true\n")
    (check,) = check_sandbox(load_settings())
    assert check.status == "fail" and "bash fails on every call" in check.detail
    assert "DOCKER_HOST" in check.hint


async def test_commands_holding_their_threads_leave_database_hops_a_thread():
    """Eight commands at once, each holding its thread until released: a database hop
    (asyncio.to_thread) still runs at once. The default executor is made two threads here; on
    it, the commands would have held every thread and the hop would wait for them to end."""
    from concurrent.futures import ThreadPoolExecutor

    from lib.sandbox.container import Sandbox

    loop = asyncio.get_running_loop()
    loop.set_default_executor(ThreadPoolExecutor(max_workers=2))
    box = Sandbox(SandboxConfig(), client=object(), sweeper=False)
    release = threading.Event()
    running: list[str] = []

    def command(key: str, text: str) -> str:
        running.append(key)
        release.wait(60)
        return f"{key} done"

    box.run_sync = command  # the real one talks to a Docker engine
    commands = [asyncio.create_task(box.run(f"chat-{n}", "sleep 60")) for n in range(8)]
    try:
        async with asyncio.timeout(30):  # a ceiling for the events, not a measure
            while len(running) < 8:
                await asyncio.sleep(0.01)
            assert await asyncio.to_thread(lambda: "the hop ran") == "the hop ran"
    finally:
        release.set()
    assert await asyncio.gather(*commands) == [f"chat-{n} done" for n in range(8)]
