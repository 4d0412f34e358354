"""Run shell commands in a locked-down Docker container, one warm container per chat.

The `Sandbox` here keeps each chat's warm container, runs commands in it and removes it when
idle. What it is built from lives beside it: execution (one command: the exec, its timeout, the
reaper, the OOM check), engine (the connection to the Docker engine and its errors), layout
(names, labels, and every limit and lock-down of a container), scripts (the shell run inside
containers), output (a command's capped output and the text the model sees), workspace (each
chat's fixed-size `/workspace`) and image (the sandbox and tools images).

Why warm containers: a command in a running container takes a fraction of a container's
create/start/remove cycle (figures in docs/sandbox.md, from bench/sandbox_latency.py).

Idle tracking lives here, in Ash's process, never in a file a command could touch: each
command's end is recorded per container, and a sweeper thread removes containers idle longer
than `sandbox.idle_timeout` (and deletes the workspaces of chats idle longer than
`sandbox.workspace_ttl_days`). After every command a second exec kills every process of the
sandbox user except the container's main process, so nothing a command starts (background
jobs, `setsid`, double forks) outlives it. As a backstop if Ash dies, the main process exits
after MAX_LIFETIME and `auto_remove` deletes the container.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
import weakref
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from lib.errors import DockerError
from lib.sandbox.engine import connect, docker_error
from lib.sandbox.execution import ContainerGone, oom_killed, reap, run_command
from lib.sandbox.layout import (
    CHAT_LABEL,
    IDLE_LABEL,
    LABEL,
    OWNER_LABEL,
    STARTED_LABEL,
    container_name,
    container_options,
)
from lib.sandbox.output import SIGKILL_EXIT, CommandResult
from lib.sandbox.workspace import Workspaces, last_used
from lib.threads import Pool

if TYPE_CHECKING:
    import docker

    from lib.config import SandboxConfig

log = logging.getLogger("ash.sandbox")

# Commands run in threads of their own (lib/threads.py), never the default executor's: each holds
# its thread for up to [sandbox] timeout. As many as chats run turns at once by default
# ([telegram] max_concurrent_chats); a command past that waits for a thread, holding none.
COMMANDS = Pool("ash-sandbox", 8)
# The main process only keeps the container up; Ash's sweeper removes it when idle. If Ash dies
# it still ends after this many seconds (Ash replaces an older one before a command, never in one).
MAX_LIFETIME = 86_400


class Sandbox:
    """Runs commands for chats in their warm containers; thread-safe, blocking calls in threads."""

    def __init__(self, config: SandboxConfig, client: docker.DockerClient | None = None, *, sweeper: bool = True):
        self.config = config
        self._sweeps = sweeper
        self._client = client
        self._lock = threading.Lock()
        self._chat_locks: dict[str, threading.Lock] = {}
        self._workspaces = Workspaces(config)
        # Container id -> time.monotonic() of its last command's end (or of first sight).
        self._last_used: dict[str, float] = {}
        # Containers this instance started or ran a command in (others keep their own idle label).
        self._mine: set[str] = set()
        self._owner = uuid.uuid4().hex[:12]
        self._sweeper: threading.Thread | None = None
        self._stop = threading.Event()

    @property
    def client(self) -> docker.DockerClient:
        """The docker client, connected on first use."""
        with self._lock:
            if self._client is None:
                self._client = connect(timeout=self.config.timeout + 30)
            return self._client

    def close(self) -> None:
        """Stop the sweeper and close the connection (containers stay until idle or MAX_LIFETIME)."""
        self._stop.set()
        with self._lock:
            self._sweeper = None
            if self._client is not None:
                self._client.close()
                self._client = None

    async def run(self, key: str, command: str) -> CommandResult:
        """Run `command` in the chat's sandbox off the event loop (in the COMMANDS pool)."""
        return await COMMANDS.run(self.run_sync, key, command)

    def _chat_lock(self, key: str) -> threading.Lock:
        with self._lock:
            return self._chat_locks.setdefault(key, threading.Lock())

    def run_sync(self, key: str, command: str) -> CommandResult:
        """Run `command` in the chat's warm container, starting one if needed."""
        self.start_sweeper()
        with self._chat_lock(key):
            try:
                container_id = self._ensure_container(key)
                try:
                    return self._exec(container_id, command)
                except ContainerGone:
                    # It went away between our check and the exec: start a fresh one once.
                    return self._exec(self._ensure_container(key), command)
            except DockerError:
                raise
            except Exception as exc:
                raise docker_error(exc, self.config.image) from None

    def _ensure_container(self, key: str) -> str:
        import docker.errors

        client = self.client
        name = container_name(key)
        try:
            container = client.containers.get(name)
            started = float(container.labels.get(STARTED_LABEL) or 0)
            # Replace a container near the end of its life before the command, never during it.
            if container.status == "running" and time.time() - started < MAX_LIFETIME - self.config.timeout - 60:
                self._used(container.id)
                return container.id
            self._retire(container.id)
        except docker.errors.NotFound:
            pass
        self._workspaces.prepare(client, key)
        options = container_options(self.config, key, ["sleep", str(MAX_LIFETIME)])
        options["labels"].update(
            {
                IDLE_LABEL: f"{self.config.idle_timeout:g}",
                STARTED_LABEL: str(int(time.time())),
                OWNER_LABEL: self._owner,
            }
        )
        try:
            container = client.containers.create(name=name, auto_remove=True, **options)
        except docker.errors.APIError as exc:
            if exc.status_code != 409:
                raise
            # Another process created it a moment ago; use theirs.
            container = client.containers.get(name)
            if container.status == "running":
                self._used(container.id)
                return container.id
        container.start()
        self._used(container.id)
        return container.id

    def _used(self, container_id: str) -> None:
        """Note activity: the only idle clock, kept where no command can reach it."""
        self._mine.add(container_id)
        self._last_used[container_id] = time.monotonic()

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
        self._last_used.pop(container_id, None)
        self._mine.discard(container_id)

    def remove_workspace(self, key: str) -> bool:
        """Delete a chat's container and workspace (its files are lost); whether there was one."""
        import docker.errors

        with contextlib.suppress(docker.errors.NotFound):
            self._retire(self.client.containers.get(container_name(key)).id)
        return self._workspaces.delete(self.client, key)

    def _exec(self, container_id: str, command: str) -> CommandResult:
        api = self.client.api
        ran = run_command(
            api, container_id, command, timeout=self.config.timeout, output_limit=self.config.output_limit
        )
        if ran.timed_out:
            self._retire(container_id)
        oom = ran.exit_code == SIGKILL_EXIT and oom_killed(api, container_id)
        if oom:
            # A container that hit its memory limit is replaced: the next command starts clean.
            self._retire(container_id)
        elif not ran.timed_out:
            # Whatever the command started dies with it; a container where something survived goes.
            if reap(api, container_id):
                self._used(container_id)
            else:
                self._retire(container_id)
        return CommandResult(
            output=ran.output.text(),
            exit_code=ran.exit_code,
            duration=ran.duration,
            timed_out=ran.timed_out,
            oom=oom,
            truncated=ran.output.truncated,
            output_bytes=ran.output.total,
        )

    # The sweeper: idle containers and expired workspaces.

    def sweep_interval(self) -> float:
        """Seconds between sweeps: a quarter of the idle timeout, between 0.5 s and a minute."""
        return max(0.5, min(60.0, self.config.idle_timeout / 4))

    def start_sweeper(self) -> None:
        """Start the background sweeper once (it stops with close() or when this object goes)."""
        with self._lock:
            if not self._sweeps or (self._sweeper is not None and self._sweeper.is_alive()):
                return
            self._stop = threading.Event()
            self._sweeper = threading.Thread(
                target=_sweep_loop,
                args=(weakref.ref(self), self._stop, self.sweep_interval()),
                name="ash-sandbox-sweeper",
                daemon=True,
            )
            self._sweeper.start()

    def sweep(self, keys: Collection[str] | None = None) -> tuple[int, int]:
        """Remove idle containers and expired workspaces (of `keys` only, if given); returns the counts."""
        try:
            containers = [c for c in self.containers() if keys is None or c.labels.get(CHAT_LABEL) in keys]
            stopped = self._sweep_containers(containers)
            deleted = self._sweep_workspaces({c.labels.get(CHAT_LABEL) for c in containers}, keys)
        except DockerError:
            raise
        except Exception as exc:
            raise docker_error(exc) from None
        return stopped, deleted

    def _sweep_containers(self, containers: list[Any]) -> int:
        now = time.monotonic()
        stopped = 0
        for container in containers:
            if container.status != "running":
                continue
            # A container first seen now (another process's, or one from before a restart) is
            # timed from now, with the idle timeout it was made with if that is longer.
            last = self._last_used.setdefault(container.id, now)
            idle = self.config.idle_timeout
            if container.id not in self._mine:
                with contextlib.suppress(ValueError):
                    idle = max(idle, float(container.labels.get(IDLE_LABEL) or 0))
            if now - last < idle:
                continue
            key = container.labels.get(CHAT_LABEL, "")
            lock = self._chat_lock(key)
            if not lock.acquire(blocking=False):
                continue  # a command is running
            try:
                if time.monotonic() - self._last_used.get(container.id, now) < idle:
                    continue
                self._retire(container.id)
                self._workspaces.mark_used(self.client, key)
                stopped += 1
                log.info("sandbox %s removed after %.0f s idle", container.name, now - last)
            finally:
                lock.release()
        return stopped

    def _sweep_workspaces(self, active: set[str | None], keys: Collection[str] | None) -> int:
        ttl = self.config.workspace_ttl_days * 86_400
        if ttl <= 0:
            return 0
        deleted = 0
        now = time.time()
        for key, used in self.workspaces().items():
            if key in active or now - used < ttl or (keys is not None and key not in keys):
                continue
            lock = self._chat_lock(key)
            if not lock.acquire(blocking=False):
                continue
            try:
                self.remove_workspace(key)
                deleted += 1
                log.info("workspace of %s deleted after %.1f days unused", key, (now - used) / 86_400)
            finally:
                lock.release()
        return deleted

    # Maintenance, for `ash sandbox status|prune`.

    def containers(self) -> list[Any]:
        """Every sandbox container on the host."""
        return self.client.containers.list(all=True, filters={"label": LABEL})

    def volumes(self) -> list[Any]:
        """Every chat workspace volume on the host."""
        return [v for v in self.client.volumes.list() if v.name.startswith("ash-workspace-")]

    def workspaces(self) -> dict[str, float]:
        """Every chat with a workspace, and when it was last used (epoch seconds)."""
        return last_used(self.client)

    def prune(self, *, volumes: bool = False) -> tuple[int, int]:
        """Remove every sandbox container (and, with `volumes`, every workspace); returns the counts."""
        try:
            removed = 0
            for container in self.containers():
                self._retire(container.id)
                removed += 1
            gone = 0
            if volumes:
                for key in self.workspaces():
                    with self._chat_lock(key):
                        gone += self.remove_workspace(key)
        except DockerError:
            raise
        except Exception as exc:
            raise docker_error(exc) from None
        return removed, gone


def _sweep_loop(ref: weakref.ref[Sandbox], stop: threading.Event, interval: float) -> None:
    """The sweeper thread: sweep every `interval` seconds while its Sandbox lives."""
    while not stop.wait(interval):
        box = ref()
        if box is None:
            return
        try:
            box.sweep()
        except Exception as exc:
            log.warning("sandbox sweep failed: %s", exc)
        del box


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
