"""Run shell commands in a locked-down Docker container, one warm container per chat.

Talks to the Docker Engine API through the docker SDK (`docker.from_env()`: `DOCKER_HOST`, and
for `tcp://` hosts `DOCKER_TLS_VERIFY` and `DOCKER_CERT_PATH`). Every container has no network
(unless `sandbox.network_disabled = false`), memory + swap, CPU and pids limits, a read-only
root with a tmpfs `/tmp`, the chat's own `/workspace` volume, a non-root user, no capabilities,
no-new-privileges and an environment built here (never `os.environ`). The Docker socket is
never mounted.

Why warm containers: a command in a running container takes a fraction of a container's
create/start/remove cycle (figures in docs/sandbox.md, from bench/sandbox_latency.py). The
container reaps itself: its main process exits once no command touched it for
`sandbox.idle_timeout` seconds, and `auto_remove` deletes it, so nothing lingers even if Ash dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lib.errors import DockerError

if TYPE_CHECKING:
    import docker

    from lib.config import SandboxConfig

log = logging.getLogger("ash.sandbox")

LABEL = "ash.sandbox"
CHAT_LABEL = "ash.chat"
SANDBOX_USER = "1000:1000"
WORKDIR = "/workspace"
# The only environment a sandboxed command sees; secrets live in Ash's process, never here.
SANDBOX_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": WORKDIR,
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
    "TERM": "dumb",
}
TMPFS = {"/tmp": "rw,nosuid,nodev,size=64m,mode=1777"}
ACTIVITY_FILE = "/tmp/.ash-active"
# Main process of a warm container: live while a command touched ACTIVITY_FILE recently.
IDLE_LOOP = "touch {f}; while [ $(( $(date +%s) - $(stat -c %Y {f}) )) -lt {idle} ]; do sleep {step}; done"
# Each command marks the container active and runs (in bash when the image has it) as the
# leader of its own process group; whatever it leaves running is killed when it ends, so a fork
# bomb or a forgotten background job cannot starve the chat's next command of pids.
COMMAND_WRAPPER = f"""touch {ACTIVITY_FILE} 2>/dev/null
shell=sh; command -v bash >/dev/null 2>&1 && shell=bash
setsid "$shell" -c "$1" & pid=$!
wait "$pid"; rc=$?
for _ in 1 2 3 4 5 6 7 8 9 10; do kill -9 -"$pid" 2>/dev/null || break; sleep 0.05; done
exit "$rc"
"""
# Seconds the SDK waits for the engine to answer the first request.
CONNECT_TIMEOUT = 10
SIGKILL_EXIT = 137
# cgroup v1 and v2 both count OOM kills ("oom_kill N"); the container sees its own cgroup.
OOM_COUNTER = "cat /sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events 2>/dev/null"


@dataclass(frozen=True)
class CommandResult:
    """What one command did: its (capped) output, exit code, duration and why it stopped."""

    output: str
    exit_code: int | None
    duration: float
    timed_out: bool = False
    oom: bool = False
    truncated: bool = False
    output_bytes: int = 0


class OutputCap:
    """Keeps the first and last `limit // 2` bytes of a stream, counting what falls between."""

    def __init__(self, limit: int):
        self.limit = max(limit, 2)
        self.head = bytearray()
        self.tail: deque[bytes] = deque()
        self.tail_size = 0
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        """Add a chunk of output; memory stays bounded however much the command prints."""
        self.total += len(chunk)
        room = self.limit // 2 - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        self.tail.append(chunk)
        self.tail_size += len(chunk)
        keep = self.limit - self.limit // 2
        while self.tail_size - len(self.tail[0]) >= keep:
            self.tail_size -= len(self.tail.popleft())

    @property
    def truncated(self) -> bool:
        return self.total > self.limit

    def text(self) -> str:
        """The output, with the cut noted where the middle was dropped."""
        tail = b"".join(self.tail)
        if not self.truncated:
            return (bytes(self.head) + tail).decode("utf-8", "replace")
        keep = self.limit - self.limit // 2
        tail = tail[-keep:]
        cut = self.total - len(self.head) - len(tail)
        head = bytes(self.head).decode("utf-8", "replace")
        return f"{head}\n[... {cut} bytes of output cut; first and last {len(tail)} bytes kept ...]\n" + tail.decode(
            "utf-8", "replace"
        )


def chat_key(provider: str, chat_id: str | int) -> str:
    """A Docker-name-safe key for one chat: containers and volumes are named from it."""
    raw = f"{provider}-{chat_id}"
    return re.sub(r"[^A-Za-z0-9_.-]", "_", raw)


def container_name(key: str) -> str:
    """The warm container of a chat."""
    return f"ash-sandbox-{key}"


def volume_name(key: str) -> str:
    """The chat's `/workspace` volume; no other chat's container ever mounts it."""
    return f"ash-workspace-{key}"


def parse_bytes(value: str) -> int:
    """A Docker size such as 512m or 1g in bytes."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)b?\s*", value.lower())
    if not match:
        raise DockerError(None, f"sandbox.memory_limit: expected a size such as 512m or 1g, got {value!r}")
    number, unit = match.groups()
    return int(float(number) * 1024 ** "_kmgt".index(unit or "_"))


def container_options(config: SandboxConfig, key: str, command: list[str]) -> dict[str, Any]:
    """Keyword arguments for `containers.create`: every limit and lock-down in one place."""
    from docker.types import Mount

    memory = parse_bytes(config.memory_limit)
    options: dict[str, Any] = {
        "image": config.image,
        "command": command,
        "labels": {LABEL: "1", CHAT_LABEL: key},
        "user": SANDBOX_USER,
        "working_dir": WORKDIR,
        "environment": dict(SANDBOX_ENV),
        "mem_limit": memory,
        # Swap equal to memory means no swap at all: the limit is a real limit.
        "memswap_limit": memory,
        "nano_cpus": int(config.cpu_limit * 1e9),
        "pids_limit": config.pids_limit,
        "read_only": True,
        "tmpfs": dict(TMPFS),
        "mounts": [Mount(target=WORKDIR, source=volume_name(key), type="volume")],
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        # tini as PID 1 reaps zombies a command leaves behind.
        "init": True,
        "detach": True,
    }
    if config.network_disabled:
        options["network_disabled"] = True
        options["network_mode"] = "none"
    return options


def _docker_error(exc: Exception, image: str = "") -> DockerError:
    """Map an SDK exception to DockerError with a sentence a user (or the model) can act on."""
    import docker.errors

    if isinstance(exc, DockerError):
        return exc
    if isinstance(exc, docker.errors.ImageNotFound) or (
        isinstance(exc, docker.errors.APIError) and exc.status_code == 404 and "image" in str(exc).lower()
    ):
        return DockerError(404, f"the sandbox image {image} is missing on the Docker host; run `ash sandbox build`")
    if isinstance(exc, docker.errors.APIError):
        return DockerError(exc.status_code, f"Docker engine error: {exc.explanation or exc}")
    return DockerError(None, f"cannot reach the Docker engine ({str(exc)[:200]}); start it or set DOCKER_HOST")


def connect(timeout: float = 60.0) -> docker.DockerClient:
    """A docker client from the environment, or DockerError when no engine answers."""
    import docker

    try:
        client = docker.from_env(timeout=CONNECT_TIMEOUT)
    except Exception as exc:
        raise _docker_error(exc) from None
    # Long commands stream quietly; the socket must wait longer than the command timeout.
    client.api.timeout = timeout
    return client


class Sandbox:
    """Runs commands for chats in their warm containers; thread-safe, blocking calls in threads."""

    def __init__(self, config: SandboxConfig, client: docker.DockerClient | None = None):
        self.config = config
        self._client = client
        self._lock = threading.Lock()
        self._chat_locks: dict[str, threading.Lock] = {}

    @property
    def client(self) -> docker.DockerClient:
        """The docker client, connected on first use."""
        with self._lock:
            if self._client is None:
                self._client = connect(timeout=self.config.timeout + 30)
            return self._client

    def close(self) -> None:
        """Close the connection to the engine (containers keep running until idle)."""
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    async def run(self, key: str, command: str) -> CommandResult:
        """Run `command` in the chat's sandbox off the event loop."""
        return await asyncio.to_thread(self.run_sync, key, command)

    def run_sync(self, key: str, command: str) -> CommandResult:
        """Run `command` in the chat's warm container, starting one if needed."""
        with self._lock:
            chat_lock = self._chat_locks.setdefault(key, threading.Lock())
        with chat_lock:
            try:
                container_id = self._ensure_container(key)
                try:
                    return self._exec(container_id, command)
                except _ContainerGone:
                    # It reaped itself between our check and the exec: start a fresh one once.
                    return self._exec(self._ensure_container(key), command)
            except DockerError:
                raise
            except Exception as exc:
                raise _docker_error(exc, self.config.image) from None

    def _ensure_container(self, key: str) -> str:
        import docker.errors

        client = self.client
        name = container_name(key)
        try:
            container = client.containers.get(name)
            if container.status == "running":
                return container.id
            self._retire(container.id)
        except docker.errors.NotFound:
            pass
        idle = max(self.config.idle_timeout, self.config.timeout + 10)
        loop = IDLE_LOOP.format(f=ACTIVITY_FILE, idle=int(idle), step=max(1, min(5, int(idle // 4))))
        options = container_options(self.config, key, ["/bin/sh", "-c", loop])
        try:
            container = client.containers.create(name=name, auto_remove=True, **options)
        except docker.errors.APIError as exc:
            if exc.status_code != 409:
                raise
            # Another process created it a moment ago; use theirs.
            container = client.containers.get(name)
            if container.status == "running":
                return container.id
        container.start()
        return container.id

    def _retire(self, container_id: str) -> None:
        """Kill a container and wait until it is gone, so the next command never meets it dying."""
        import docker.errors

        api = self.client.api
        with contextlib.suppress(docker.errors.APIError):  # already stopped, or being removed
            api.kill(container_id)
        with contextlib.suppress(docker.errors.APIError):  # auto_remove got there first
            api.remove_container(container_id, force=True)
        try:
            api.wait(container_id, condition="removed", timeout=15)
        except docker.errors.NotFound:
            pass  # gone already
        except Exception as exc:
            log.warning("sandbox %s did not go away: %s", container_id[:12], exc)

    def _exec(self, container_id: str, command: str) -> CommandResult:
        import docker.errors

        api = self.client.api
        try:
            exec_id = api.exec_create(
                container_id,
                ["/bin/sh", "-c", COMMAND_WRAPPER, "sh", command],
                user=SANDBOX_USER,
                environment=dict(SANDBOX_ENV),
                workdir=WORKDIR,
                stdout=True,
                stderr=True,
            )["Id"]
        except docker.errors.APIError as exc:
            if exc.status_code in (404, 409):
                raise _ContainerGone from None
            raise
        killed = threading.Event()

        def kill() -> None:
            # Docker cannot kill an exec alone; killing the container stops everything it started.
            killed.set()
            try:
                api.kill(container_id)
            except Exception as exc:
                log.warning("could not kill timed-out sandbox %s: %s", container_id[:12], exc)

        cap = OutputCap(self.config.output_limit)
        started = time.monotonic()
        timer = threading.Timer(self.config.timeout, kill)
        timer.daemon = True
        timer.start()
        try:
            for chunk in api.exec_start(exec_id, stream=True):
                cap.feed(chunk)
        except Exception:
            if not killed.is_set():
                raise
        finally:
            timer.cancel()
        duration = time.monotonic() - started
        if killed.is_set():
            self._retire(container_id)
        exit_code = None if killed.is_set() else _exit_code(api, exec_id)
        oom = exit_code == SIGKILL_EXIT and self._oom_killed(container_id)
        if oom:
            # A container that hit its memory limit is replaced: the next command starts clean.
            self._retire(container_id)
        return CommandResult(
            output=cap.text(),
            exit_code=exit_code,
            duration=duration,
            timed_out=killed.is_set(),
            oom=oom,
            truncated=cap.truncated,
            output_bytes=cap.total,
        )

    def _oom_killed(self, container_id: str) -> bool:
        """Whether the kernel's OOM killer fired in the container (its cgroup counts kills)."""
        import docker.errors

        api = self.client.api
        try:
            exec_id = api.exec_create(container_id, ["/bin/sh", "-c", OOM_COUNTER], user=SANDBOX_USER)["Id"]
            counters = api.exec_start(exec_id).decode("utf-8", "replace")
        except docker.errors.APIError:
            return True  # PID 1 itself went: only the OOM killer sends SIGKILL unasked.
        kills = re.search(r"^oom_kill (\d+)", counters, re.MULTILINE)
        if kills:
            return int(kills.group(1)) > 0
        try:  # no counter (old kernel): the engine's flag, set from the OOM event
            return bool(api.inspect_container(container_id)["State"].get("OOMKilled"))
        except docker.errors.NotFound:
            return True

    # Maintenance, for `ash sandbox status|prune`.

    def containers(self) -> list[Any]:
        """Every sandbox container on the host."""
        return self.client.containers.list(all=True, filters={"label": LABEL})

    def volumes(self) -> list[Any]:
        """Every chat workspace volume on the host."""
        return [v for v in self.client.volumes.list() if v.name.startswith("ash-workspace-")]

    def prune(self, *, volumes: bool = False) -> tuple[int, int]:
        """Remove every sandbox container (and, with `volumes`, every workspace); returns the counts."""
        try:
            removed = 0
            for container in self.containers():
                container.remove(force=True)
                removed += 1
            gone = 0
            if volumes:
                for volume in self.volumes():
                    volume.remove(force=True)
                    gone += 1
        except DockerError:
            raise
        except Exception as exc:
            raise _docker_error(exc) from None
        return removed, gone


_SHARED: dict[bytes, Sandbox] = {}
_SHARED_LOCK = threading.Lock()


def shared_sandbox(config: SandboxConfig) -> Sandbox:
    """One Sandbox (one engine connection pool) per configuration for the whole process."""
    import msgspec

    key = msgspec.json.encode(config)
    with _SHARED_LOCK:
        if key not in _SHARED:
            _SHARED[key] = Sandbox(config)
        return _SHARED[key]


class _ContainerGone(Exception):
    """The warm container stopped between lookup and exec."""


def _exit_code(api: Any, exec_id: str) -> int | None:
    """The exec's exit code; the engine may need a moment to record it after the stream ends."""
    for _ in range(50):
        info = api.exec_inspect(exec_id)
        if not info.get("Running") and info.get("ExitCode") is not None:
            return info["ExitCode"]
        time.sleep(0.01)
    return None


def describe(result: CommandResult, config: SandboxConfig) -> str:
    """The text the model sees: the output, then one line on how the command ended."""
    body = result.output if result.output else "(no output)"
    if not body.endswith("\n"):
        body += "\n"
    if result.timed_out:
        status = (
            f"[killed: the command exceeded the {config.timeout:g} s time limit; "
            "the sandbox was restarted, /workspace is kept]"
        )
    elif result.oom:
        status = (
            f"[killed: out of memory (limit {config.memory_limit}); exit code {result.exit_code}; "
            "the sandbox was restarted, /workspace is kept]"
        )
    else:
        status = f"[exit code {result.exit_code}]"
    return f"{body}{status} ({result.duration:.2f} s)"
