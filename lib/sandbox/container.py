"""Run shell commands in a locked-down Docker container, one warm container per chat.

Talks to the Docker Engine API through the docker SDK (`docker.from_env()`: `DOCKER_HOST`, and
for `tcp://` hosts `DOCKER_TLS_VERIFY` and `DOCKER_CERT_PATH`). Every container has no network
(unless `sandbox.network_disabled = false`), memory + swap, CPU and pids limits, a read-only
root with a tmpfs `/tmp`, the chat's own `/workspace`, a non-root user, no capabilities,
no-new-privileges and an environment built here (never `os.environ`). The Docker socket is
never mounted into any container.

Why warm containers: a command in a running container takes a fraction of a container's
create/start/remove cycle (figures in docs/sandbox.md, from bench/sandbox_latency.py).

Idle tracking lives here, in Ash's process, never in a file a command could touch: each
command's end is recorded per container, and a sweeper thread removes containers idle longer
than `sandbox.idle_timeout` (and deletes the workspaces of chats idle longer than
`sandbox.workspace_ttl_days`). After every command a second exec kills every process of the
sandbox user except the container's main process, so nothing a command starts (background
jobs, `setsid`, double forks) outlives it. As a backstop if Ash dies, the main process exits
after MAX_LIFETIME and `auto_remove` deletes the container.

Workspaces are bounded: each chat's `/workspace` is an ext2 filesystem of
`sandbox.workspace_limit` bytes in a sparse image file (`disk.img` in the chat's `ash-disk-*`
volume). A short-lived maintenance container (TOOLS_IMAGE, root with CAP_SYS_ADMIN and the loop
devices only, no network) makes the filesystem and attaches it to a loop device; the chat's
`ash-workspace-*` volume is a `local`-driver volume that mounts that loop device
(type=ext4, device=/dev/loopN), re-defined before every container start because the loop number
can change (after a reboot, say). Writing past the limit fails with ENOSPC inside the container;
the host's disk only ever holds what was written, at most the limit. Everything goes through
the Engine API, so a remote Docker host works the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import hashlib
import logging
import re
import threading
import time
import uuid
import weakref
from collections import deque
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lib.errors import DockerError
from lib.sandbox.image import SANDBOX_ENV, SANDBOX_USER, TOOLS_IMAGE, WORKDIR, ensure_tools_image

if TYPE_CHECKING:
    import docker

    from lib.config import SandboxConfig

log = logging.getLogger("ash.sandbox")

LABEL = "ash.sandbox"
CHAT_LABEL = "ash.chat"
# On a container: the idle timeout it was created with, when it started (epoch) and who made it.
IDLE_LABEL = "ash.sandbox.idle"
STARTED_LABEL = "ash.sandbox.started"
OWNER_LABEL = "ash.sandbox.owner"
# On both volumes of a workspace: the chat key. On the mount volume: when the chat was last used.
WORKSPACE_LABEL = "ash.workspace"
USED_LABEL = "ash.workspace.used"
TOOLS_LABEL = "ash.sandbox.tools"
__all__ = ["SANDBOX_ENV", "SANDBOX_USER", "TOOLS_IMAGE", "WORKDIR"]
TMPFS = {"/tmp": "rw,nosuid,nodev,size=64m,mode=1777"}
# The main process only keeps the container up; Ash's sweeper removes it when idle. If Ash dies
# it still ends after this many seconds (Ash replaces an older one before a command, never in one).
MAX_LIFETIME = 86_400
# Each command runs (in bash when the image has it) as the leader of its own process group; the
# group is killed when it ends, and REAPER then kills whatever escaped the group (setsid, double
# forks), so a fork bomb or a forgotten background job cannot starve the chat's next command.
COMMAND_WRAPPER = """shell=sh; command -v bash >/dev/null 2>&1 && shell=bash
setsid "$shell" -c "$1" & pid=$!
wait "$pid"; rc=$?
for _ in 1 2 3 4 5 6 7 8 9 10; do kill -9 -"$pid" 2>/dev/null || break; sleep 0.05; done
exit "$rc"
"""
# Run after every command, as the sandbox user: stop then kill every process but PID 1 (the init
# that reaps zombies), the main process (PID 1's first child) and itself, until none is left.
# Shell builtins only in the loop, so it never counts its own children. Exit 3 (something is
# still alive) or 4 (no main process found): Ash replaces the container.
REAPER = """main=
read -r main _ < /proc/1/task/1/children
[ -n "$main" ] || exit 4
round=0
while [ "$round" -lt 30 ]; do
  left=
  for dir in /proc/[0-9]*; do
    p=${dir#/proc/}
    case "$p" in 1|"$main"|"$$") continue ;; esac
    stat=
    read -r stat < "$dir/stat" 2>/dev/null
    [ -n "$stat" ] || continue
    rest=${stat##*) }
    case "${rest%% *}" in Z|X) continue ;; esac
    left="$left $p"
  done
  [ -z "$left" ] && exit 0
  kill -STOP $left 2>/dev/null
  kill -KILL $left 2>/dev/null
  round=$((round + 1))
  sleep 0.02
done
exit 3
"""
# Maintenance, as root in TOOLS_IMAGE: `attach DIR SIZE` makes DIR/disk.img (a sparse ext2 image
# of SIZE bytes, root owned by the sandbox user, a legacy /old volume's files copied in) on first
# use and prints the loop device it is attached to, attaching it when it is not; `detach DIR`
# detaches it. A loop device is recognised by the file name it was attached with (DIR is unique
# per chat, and the sandbox cannot attach loop devices) and refused if its file was deleted.
MAINTENANCE = """action=$1 dir=$2 size=$3 img=$2/disk.img
fail() { echo "ASH-ERROR $*"; exit 1; }
[ -e /dev/loop-control ] || mknod -m 600 /dev/loop-control c 10 237 || fail "no /dev/loop-control"
node() { [ -e "$1" ] || mknod -m 600 "$1" b 7 "${1#/dev/loop}"; }
for sys in /sys/block/loop*; do [ -e "$sys" ] && node "/dev/${sys#/sys/block/}"; done
find_loops() {
  for sys in /sys/block/loop*; do
    [ -r "$sys/loop/backing_file" ] || continue
    dev=/dev/${sys#/sys/block/}
    name=$(losetup "$dev" 2>/dev/null) || continue
    [ "${name#*: * }" = "$1" ] || continue
    case "$(cat "$sys/loop/backing_file")" in *"(deleted)") continue ;; esac
    echo "$dev"
  done
}
attach() {
  tries=0
  while [ "$tries" -lt 50 ]; do
    dev=$(losetup -f) && node "$dev" && losetup "$dev" "$1" 2>/dev/null && { echo "$dev"; return 0; }
    tries=$((tries + 1)); sleep 0.1
  done
  return 1
}
if [ "$action" = detach ]; then
  for dev in $(find_loops "$img"); do losetup -d "$dev" || fail "cannot detach $dev"; done
  echo "ASH-DETACHED"; exit 0
fi
if [ ! -f "$img" ]; then
  rm -f "$img.new"
  truncate -s "$size" "$img.new" || fail "cannot create the image"
  mke2fs -F -m 0 "$img.new" >/dev/null 2>&1 || fail "mke2fs failed"
  dev=$(attach "$img.new") || fail "no free loop device"
  mkdir -p /tmp/ws && mount -t ext4 "$dev" /tmp/ws || { losetup -d "$dev"; fail "cannot mount the new image"; }
  rmdir /tmp/ws/lost+found
  copied=yes
  if [ -d /old ]; then cp -a /old/. /tmp/ws/ || copied=no; fi
  chown 1000:1000 /tmp/ws && chmod 700 /tmp/ws
  umount /tmp/ws; losetup -d "$dev"
  [ "$copied" = yes ] || fail "the old workspace does not fit in the workspace limit"
  mv "$img.new" "$img" || fail "cannot rename the image"
fi
dev=$(find_loops "$img" | head -n 1)
[ -n "$dev" ] || dev=$(attach "$img") || fail "no free loop device"
echo "ASH-LOOP $dev"
"""
# Capabilities of the maintenance container: make device nodes, attach and mount (SYS_ADMIN), set
# owners, read a legacy workspace. Block major 7 is loop, char 10:237 /dev/loop-control.
TOOLS_CAPS = ["SYS_ADMIN", "MKNOD", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID"]
TOOLS_DEVICES = ["b 7:* rwm", "c 10:237 rwm"]
WORKSPACE_MOUNT_OPTIONS = "nosuid,nodev,discard"
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
    """The chat's `/workspace` volume (its loop-mounted filesystem); no other chat's container mounts it."""
    return f"ash-workspace-{key}"


def disk_volume_name(key: str) -> str:
    """The volume holding the chat's filesystem image; only maintenance containers mount it."""
    return f"ash-disk-{key}"


def disk_dir(key: str) -> str:
    """Where maintenance containers mount the chat's disk volume: unique per chat, always short
    (the loop device keeps the first 64 bytes of its file's name, by which it is found again)."""
    return "/ash/" + hashlib.sha256(key.encode()).hexdigest()[:32]


def parse_bytes(value: str, setting: str = "sandbox.memory_limit") -> int:
    """A Docker size such as 512m or 1g in bytes."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)b?\s*", value.lower())
    if not match:
        raise DockerError(None, f"{setting}: expected a size such as 512m or 1g, got {value!r}")
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


def connect(timeout: float = 60.0, *, connect_timeout: float = CONNECT_TIMEOUT) -> docker.DockerClient:
    """A docker client from the environment, or DockerError when no engine answers."""
    import docker

    try:
        client = docker.from_env(timeout=connect_timeout)
    except Exception as exc:
        raise _docker_error(exc) from None
    # Long commands stream quietly; the socket must wait longer than the command timeout.
    client.api.timeout = timeout
    return client


class Sandbox:
    """Runs commands for chats in their warm containers; thread-safe, blocking calls in threads."""

    def __init__(self, config: SandboxConfig, client: docker.DockerClient | None = None, *, sweeper: bool = True):
        self.config = config
        self._sweeps = sweeper
        self._client = client
        self._lock = threading.Lock()
        self._chat_locks: dict[str, threading.Lock] = {}
        # Loop devices are a host-wide resource: one attach at a time from this process.
        self._attach_lock = threading.Lock()
        # Container id -> time.monotonic() of its last command's end (or of first sight).
        self._last_used: dict[str, float] = {}
        # Containers this instance started or ran a command in (others keep their own idle label).
        self._mine: set[str] = set()
        self._owner = uuid.uuid4().hex[:12]
        self._tools_ready = False
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
        """Run `command` in the chat's sandbox off the event loop."""
        return await asyncio.to_thread(self.run_sync, key, command)

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
                except _ContainerGone:
                    # It went away between our check and the exec: start a fresh one once.
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
            started = float(container.labels.get(STARTED_LABEL) or 0)
            # Replace a container near the end of its life before the command, never during it.
            if container.status == "running" and time.time() - started < MAX_LIFETIME - self.config.timeout - 60:
                self._used(container.id)
                return container.id
            self._retire(container.id)
        except docker.errors.NotFound:
            pass
        self._prepare_workspace(key)
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

    # Workspaces: a fixed-size filesystem image per chat, loop-mounted by the `local` driver.

    def _prepare_workspace(self, key: str) -> None:
        """Make (first use) and attach the chat's filesystem, then point its mount volume at it."""
        import docker.errors

        volumes = self.client.volumes
        legacy = False
        try:
            current = volumes.get(volume_name(key))
            legacy = not (current.attrs.get("Options") or {}).get("device")
        except docker.errors.NotFound:
            pass
        with self._attach_lock:
            device = self._maintain(key, "attach", legacy=legacy)
        self._define_mount(key, device)

    def _define_mount(self, key: str, device: str) -> None:
        """(Re)create the chat's mount volume for `device`, stamped with the time of use."""
        import docker.errors

        volumes = self.client.volumes
        name = volume_name(key)
        with contextlib.suppress(docker.errors.NotFound):
            volumes.get(name).remove()
        volumes.create(
            name=name,
            driver="local",
            driver_opts={"type": "ext4", "device": device, "o": WORKSPACE_MOUNT_OPTIONS},
            labels={WORKSPACE_LABEL: key, USED_LABEL: str(int(time.time()))},
        )

    def _mark_used(self, key: str) -> None:
        """Stamp the chat's workspace as used now (after its container went), for the TTL sweep."""
        import docker.errors

        try:
            volume = self.client.volumes.get(volume_name(key))
            device = (volume.attrs.get("Options") or {}).get("device")
            if device:
                self._define_mount(key, device)
        except docker.errors.APIError as exc:  # in use again, or gone: nothing to stamp
            log.debug("workspace %s not stamped: %s", key, exc)

    def _maintain(self, key: str, action: str, *, legacy: bool = False) -> str:
        """Run MAINTENANCE in a short-lived tools container; returns the loop device (attach)."""
        import docker.errors
        from docker.types import Mount

        client = self.client
        if not self._tools_ready:
            ensure_tools_image(client, progress=log.info)
            self._tools_ready = True
        disk = disk_volume_name(key)
        try:
            client.volumes.get(disk)
        except docker.errors.NotFound:
            if action == "detach":
                return ""
            client.volumes.create(name=disk, driver="local", labels={WORKSPACE_LABEL: key})
        mounts = [Mount(target=disk_dir(key), source=disk, type="volume")]
        if legacy:
            mounts.append(Mount(target="/old", source=volume_name(key), type="volume", read_only=True))
        size = parse_bytes(self.config.workspace_limit, "sandbox.workspace_limit")
        container = client.containers.create(
            TOOLS_IMAGE,
            ["/bin/sh", "-c", MAINTENANCE, "sh", action, disk_dir(key), str(size)],
            user="0:0",
            labels={TOOLS_LABEL: "1", WORKSPACE_LABEL: key},
            mounts=mounts,
            cap_drop=["ALL"],
            cap_add=list(TOOLS_CAPS),
            device_cgroup_rules=list(TOOLS_DEVICES),
            # Docker's AppArmor profile forbids mount(2); seccomp stays on.
            security_opt=["apparmor=unconfined", "no-new-privileges"],
            network_disabled=True,
            network_mode="none",
            environment={"PATH": SANDBOX_ENV["PATH"]},
            mem_limit=64 * 1024 * 1024,
            pids_limit=64,
        )
        try:
            container.start()
            status = container.wait(timeout=120).get("StatusCode")
            output = container.logs().decode("utf-8", "replace")
        finally:
            with contextlib.suppress(docker.errors.APIError):
                container.remove(force=True)
        error = re.search(r"^ASH-ERROR (.*)$", output, re.MULTILINE)
        if status != 0 or error:
            reason = error.group(1) if error else output.strip()[-200:]
            raise DockerError(None, f"the workspace of {key} could not be {action}ed: {reason}")
        if action == "detach":
            return ""
        found = re.search(r"^ASH-LOOP (/dev/loop\d+)$", output, re.MULTILINE)
        if not found:
            raise DockerError(None, f"the workspace of {key} could not be attached: {output.strip()[-200:]}")
        if legacy:
            with contextlib.suppress(docker.errors.NotFound):
                client.volumes.get(volume_name(key)).remove()
        return found.group(1)

    def remove_workspace(self, key: str) -> bool:
        """Delete a chat's container and workspace (its files are lost); whether there was one."""
        import docker.errors

        with contextlib.suppress(docker.errors.NotFound):
            self._retire(self.client.containers.get(container_name(key)).id)
        had = False
        try:
            self.client.volumes.get(disk_volume_name(key))
            had = True
            with self._attach_lock:
                self._maintain(key, "detach")
        except docker.errors.NotFound:
            pass
        for name in (volume_name(key), disk_volume_name(key)):
            with contextlib.suppress(docker.errors.NotFound):
                self.client.volumes.get(name).remove(force=True)
                had = True
        return had

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
        elif not killed.is_set():
            self._reap(container_id)
            self._used(container_id)
        return CommandResult(
            output=cap.text(),
            exit_code=exit_code,
            duration=duration,
            timed_out=killed.is_set(),
            oom=oom,
            truncated=cap.truncated,
            output_bytes=cap.total,
        )

    def _reap(self, container_id: str) -> None:
        """Kill every process the command left (REAPER); replace the container if that fails."""
        import docker.errors

        api = self.client.api
        try:
            exec_id = api.exec_create(container_id, ["/bin/sh", "-c", REAPER], user=SANDBOX_USER)["Id"]
            api.exec_start(exec_id)
            code = _exit_code(api, exec_id)
        except docker.errors.APIError as exc:
            if exc.status_code in (404, 409):
                return  # the command stopped the container itself: nothing left to kill
            raise
        if code != 0:
            log.warning("sandbox %s: processes survived the reaper (exit %s); replacing it", container_id[:12], code)
            self._retire(container_id)

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
            raise _docker_error(exc) from None
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
                self._mark_used(key)
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
        found: dict[str, float] = {}
        for volume in self.client.volumes.list():
            labels = volume.attrs.get("Labels") or {}
            key = labels.get(WORKSPACE_LABEL)
            if key is None and volume.name.startswith("ash-workspace-"):
                key = volume.name.removeprefix("ash-workspace-")  # a workspace from before images
            if key is None:
                continue
            try:
                used = float(labels[USED_LABEL])
            except (KeyError, ValueError):
                used = _created(volume.attrs.get("CreatedAt"))
            found[key] = max(found.get(key, 0.0), used)
        return found

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
            raise _docker_error(exc) from None
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


def _created(stamp: str | None) -> float:
    """A volume's CreatedAt (RFC 3339) as epoch seconds; now when unreadable (never delete early)."""
    try:
        return datetime.datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return time.time()


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
