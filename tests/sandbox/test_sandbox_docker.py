"""The sandbox against a real Docker engine: every lock-down verified from inside the container."""

from __future__ import annotations

import asyncio

import pytest

from lib.config import load_settings
from lib.sandbox.container import Sandbox
from lib.sandbox.layout import chat_key, container_name, volume_name
from lib.tools.base import ToolContext
from lib.tools.bash import BashInput, BashTool
from tests.support.sandbox import cleanup, small_config

pytestmark = pytest.mark.docker


@pytest.fixture
def sandbox(docker_client):
    return Sandbox(small_config(), client=docker_client)


def run(sandbox: Sandbox, key: str, command: str):
    return sandbox.run_sync(key, command)


def test_commands_run_as_a_non_root_user_in_workspace(sandbox, chat_keys):
    result = run(sandbox, chat_keys(), "id -u; id -g; pwd")
    assert result.exit_code == 0
    assert result.output.split() == ["1000", "1000", "/workspace"]


def test_no_network(sandbox, chat_keys, docker_client):
    key = chat_keys()
    result = run(sandbox, key, "ls /sys/class/net")
    assert result.output.split() == ["lo"]
    probe = run(
        sandbox,
        key,
        "if command -v curl >/dev/null; then curl -sS -m 3 http://1.1.1.1/; "
        "else nc -w 2 1.1.1.1 80 </dev/null; fi; echo rc=$?",
    )
    assert "rc=0" not in probe.output
    assert docker_client.api.inspect_container(container_name(key))["HostConfig"]["NetworkMode"] == "none"


def test_memory_limit_kills_and_the_model_is_told(docker_client, chat_keys):
    key = chat_keys()
    tool = BashTool(Sandbox(small_config(), client=docker_client))
    context = ToolContext(user_id="1", chat_id=key, session_id=None, provider="test", settings=load_settings())
    result = asyncio.run(
        tool.execute(BashInput(command="echo before; dd if=/dev/zero of=/dev/null bs=128M count=1"), context)
    )
    assert result.is_error
    assert result.exit_code == 137
    assert result.metadata["oom"] is True
    assert "out of memory (limit 64m)" in result.output
    assert "before" in result.output


def test_memory_and_swap_limits_are_set(sandbox, chat_keys, docker_client):
    key = chat_keys()
    run(sandbox, key, "true")
    host = docker_client.api.inspect_container(container_name(key))["HostConfig"]
    assert host["Memory"] == 64 * 1024 * 1024
    assert host["MemorySwap"] == host["Memory"]
    assert host["NanoCpus"] == 1_000_000_000
    assert host["PidsLimit"] == 64


def test_timeout_kills_the_command_and_the_next_one_runs(sandbox, chat_keys):
    key = chat_keys()
    run(sandbox, key, "echo kept > /workspace/note")
    result = run(sandbox, key, "sleep 100")
    assert result.timed_out
    assert result.exit_code is None
    assert result.duration < 30  # killed at the 3 s limit, not after sleep's 100 s
    after = run(sandbox, key, "cat /workspace/note")
    assert after.output.strip() == "kept"


def test_fork_bomb_is_contained_by_the_pids_limit(sandbox, chat_keys):
    key = chat_keys()
    # The sleep keeps the command alive while the bomb hits the limit (its leftovers die with it).
    bomb = run(sandbox, key, "f(){ f|f & }; f; sleep 2; echo survived")
    out = bomb.output.lower()
    assert "fork" in out or "resource temporarily unavailable" in out or bomb.timed_out, bomb
    # The bomb's leftovers die with its command: the next command has its pids back.
    after = run(sandbox, key, "echo alive; ps -e 2>/dev/null | wc -l || ps | wc -l")
    lines = after.output.split()
    assert lines[0] == "alive"
    assert int(lines[1]) < 10


def test_background_processes_do_not_outlive_their_command(sandbox, chat_keys):
    key = chat_keys()
    run(sandbox, key, "sleep 300 >/dev/null 2>&1 &")
    assert "sleep 300" not in run(sandbox, key, "ps -ef 2>/dev/null || ps").output


def test_root_is_read_only_but_tmp_and_workspace_are_writable(sandbox, chat_keys):
    result = run(
        sandbox,
        chat_keys(),
        "touch /etc/owned 2>&1; touch /usr/bin/owned 2>&1; touch /tmp/a /workspace/b && echo writable",
    )
    assert result.output.count("Read-only file system") == 2
    assert result.output.strip().endswith("writable")


def test_no_capabilities_no_new_privileges_no_docker_socket(sandbox, chat_keys, docker_client):
    key = chat_keys()
    result = run(sandbox, key, "grep -E '^(CapEff|NoNewPrivs)' /proc/self/status; ls /var/run/docker.sock 2>&1")
    assert "CapEff:\t0000000000000000" in result.output
    assert "NoNewPrivs:\t1" in result.output
    assert "No such file or directory" in result.output
    mounts = docker_client.api.inspect_container(container_name(key))["Mounts"]
    assert [(m["Type"], m.get("Name"), m["Destination"]) for m in mounts] == [
        ("volume", volume_name(key), "/workspace")
    ]


def test_no_secret_reaches_the_environment(sandbox, chat_keys, monkeypatch):
    secrets = {
        "TELEGRAM_BOT_TOKEN": "123456:secret-telegram-token-value",
        "ANTHROPIC_API_KEY": "sk-ant-secret-value",
        "OPENAI_API_KEY": "sk-openai-secret-value",
        "BRAVE_SEARCH_API_KEY": "brave-secret-value",
        "ASH_ADMIN_TOKEN": "admin-secret-value",
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    result = run(sandbox, chat_keys(), "env; tr '\\0' '\\n' < /proc/1/environ")
    assert "PATH=" in result.output
    for name, value in secrets.items():
        assert name not in result.output
        assert value not in result.output


def test_workspace_kept_between_commands_and_private_to_the_chat(sandbox, chat_keys):
    alice, bob = chat_keys(), chat_keys()
    run(sandbox, alice, "echo alice-data > /workspace/secret.txt")
    assert run(sandbox, alice, "cat /workspace/secret.txt").output.strip() == "alice-data"
    other = run(
        sandbox,
        bob,
        "ls -A /workspace; cat /workspace/secret.txt 2>&1; "
        "find / -path /proc -prune -o -path /sys -prune -o -name secret.txt -print 2>/dev/null",
    )
    assert "alice-data" not in other.output
    assert "No such file or directory" in other.output


def test_long_output_keeps_head_and_tail_and_notes_the_cut(sandbox, chat_keys):
    result = run(sandbox, chat_keys(), "seq 1 100000")
    assert result.truncated
    assert result.output.startswith("1\n2\n3\n")
    assert result.output.endswith("99999\n100000\n")
    assert "bytes of output cut" in result.output
    assert len(result.output) < 2200
    assert result.output_bytes == len("\n".join(str(n) for n in range(1, 100001))) + 1


def test_exit_code_and_stderr_are_returned(sandbox, chat_keys):
    result = run(sandbox, chat_keys(), "echo out; echo err >&2; exit 3")
    assert result.exit_code == 3
    assert "out" in result.output and "err" in result.output


def test_missing_image_is_a_clear_error_for_the_model(docker_client, chat_keys):
    import asyncio

    tool = BashTool(Sandbox(small_config(image="ash-sandbox:no-such-tag"), client=docker_client))
    context = ToolContext(user_id="1", chat_id=chat_keys(), session_id=None, provider="test", settings=load_settings())
    result = asyncio.run(tool.execute(BashInput(command="echo hi"), context))
    assert result.is_error
    assert "ash sandbox build" in result.output


def test_offline_busybox_image_builds_and_runs(docker_client, chat_keys):
    from lib.sandbox.image import build_offline

    image, key = "ash-sandbox-test:busybox", chat_keys()
    try:
        _, base = build_offline(docker_client, image, base="busybox", progress=lambda line: None)
        assert base == "busybox"
        result = run(
            Sandbox(small_config(image=image), client=docker_client), key, "id -u; touch /workspace/x && echo ok"
        )
        assert result.output.split() == ["1000", "ok"]
    finally:
        cleanup(docker_client, key)  # the container first, so the image can go
        docker_client.images.remove(image, force=True)


def test_cli_exec_runs_a_command_and_returns_its_exit_code(docker_client):
    from click.testing import CliRunner

    from lib.commands.cli import cli

    try:
        ok = CliRunner().invoke(cli, ["sandbox", "exec", "--", "echo hello from $(id -u)"])
        assert ok.exit_code == 0, ok.output
        assert "hello from 1000" in ok.output
        failed = CliRunner().invoke(cli, ["sandbox", "exec", "--", "exit 4"])
        assert failed.exit_code == 4
        # Several words are one command's words, each kept whole (they were joined and split again).
        words = CliRunner().invoke(cli, ["sandbox", "exec", "--", "sh", "-c", "echo one two"])
        assert words.exit_code == 0 and "one two" in words.output
        status = CliRunner().invoke(cli, ["sandbox", "status"])
        assert status.exit_code == 0
        assert "ash-sandbox-cli-local  running" in status.output
    finally:
        cleanup(docker_client, chat_key("cli", "local"))
