"""What the sandbox's containers and volumes are called, how they are labelled, and their limits.

Every name comes from the chat's key (`chat_key`), and labels mark what Ash made, so the sweeper
and `ash sandbox status|prune` find it on the host again. `container_options` holds every limit
and lock-down in one place: every container has no network (unless
`sandbox.network_disabled = false`), memory + swap, CPU and pids limits, a read-only root with a
tmpfs `/tmp`, the chat's own `/workspace`, a non-root user, no capabilities, no-new-privileges
and an environment built here (`SANDBOX_ENV`, never `os.environ`). The Docker socket is never
mounted into any container.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Any

from lib.errors import DockerError
from lib.sandbox.image import SANDBOX_ENV, SANDBOX_USER, WORKDIR

if TYPE_CHECKING:
    from lib.config import SandboxConfig

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
TMPFS = {"/tmp": "rw,nosuid,nodev,size=64m,mode=1777"}
# Capabilities of the maintenance container: make device nodes, attach and mount (SYS_ADMIN), set
# owners, read a legacy workspace. Block major 7 is loop, char 10:237 /dev/loop-control.
TOOLS_CAPS = ["SYS_ADMIN", "MKNOD", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID"]
TOOLS_DEVICES = ["b 7:* rwm", "c 10:237 rwm"]
WORKSPACE_MOUNT_OPTIONS = "nosuid,nodev,discard"


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
