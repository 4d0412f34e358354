"""Each chat's `/workspace`: a fixed-size filesystem, made and attached by maintenance containers.

Workspaces are bounded: each chat's `/workspace` is an ext2 filesystem of
`sandbox.workspace_limit` bytes in a sparse image file (`disk.img` in the chat's `ash-disk-*`
volume). A short-lived maintenance container (TOOLS_IMAGE, root with CAP_SYS_ADMIN and the loop
devices only, no network) makes the filesystem and attaches it to a loop device; the chat's
`ash-workspace-*` volume is a `local`-driver volume that mounts that loop device
(type=ext4, device=/dev/loopN), re-defined before every container start because the loop number
can change (after a reboot, say). Writing past the limit fails with ENOSPC inside the container;
the host's disk only ever holds what was written, at most the limit. Everything goes through
the Engine API, so a remote Docker host works the same.

The mount volume also carries when the chat last used it (USED_LABEL), which the sweeper in
lib/sandbox/container.py reads to delete workspaces unused past `sandbox.workspace_ttl_days`.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import re
import threading
import time
from typing import TYPE_CHECKING

from lib.errors import DockerError
from lib.sandbox.image import SANDBOX_ENV, TOOLS_IMAGE, ensure_tools_image
from lib.sandbox.layout import (
    TOOLS_CAPS,
    TOOLS_DEVICES,
    TOOLS_LABEL,
    USED_LABEL,
    WORKSPACE_LABEL,
    WORKSPACE_MOUNT_OPTIONS,
    disk_dir,
    disk_volume_name,
    parse_bytes,
    volume_name,
)
from lib.sandbox.scripts import MAINTENANCE

if TYPE_CHECKING:
    import docker

    from lib.config import SandboxConfig

log = logging.getLogger("ash.sandbox")


class Workspaces:
    """The chats' workspaces on the Docker host a client talks to: made, attached, stamped, deleted."""

    def __init__(self, config: SandboxConfig):
        self.config = config
        # Loop devices are a host-wide resource: one attach at a time from this process.
        self._attach_lock = threading.Lock()
        self._tools_ready = False

    def prepare(self, client: docker.DockerClient, key: str) -> None:
        """Make (first use) and attach the chat's filesystem, then point its mount volume at it."""
        import docker.errors

        volumes = client.volumes
        legacy = False
        try:
            current = volumes.get(volume_name(key))
            legacy = not (current.attrs.get("Options") or {}).get("device")
        except docker.errors.NotFound:
            pass
        with self._attach_lock:
            device = self._maintain(client, key, "attach", legacy=legacy)
        _define_mount(client, key, device)

    def mark_used(self, client: docker.DockerClient, key: str) -> None:
        """Stamp the chat's workspace as used now (after its container went), for the TTL sweep."""
        import docker.errors

        try:
            volume = client.volumes.get(volume_name(key))
            device = (volume.attrs.get("Options") or {}).get("device")
            if device:
                _define_mount(client, key, device)
        except docker.errors.APIError as exc:  # in use again, or gone: nothing to stamp
            log.debug("workspace %s not stamped: %s", key, exc)

    def delete(self, client: docker.DockerClient, key: str) -> bool:
        """Detach and delete a chat's workspace (its container must be gone); whether there was one."""
        import docker.errors

        had = False
        try:
            client.volumes.get(disk_volume_name(key))
            had = True
            with self._attach_lock:
                self._maintain(client, key, "detach")
        except docker.errors.NotFound:
            pass
        for name in (volume_name(key), disk_volume_name(key)):
            with contextlib.suppress(docker.errors.NotFound):
                client.volumes.get(name).remove(force=True)
                had = True
        return had

    def _maintain(self, client: docker.DockerClient, key: str, action: str, *, legacy: bool = False) -> str:
        """Run MAINTENANCE in a short-lived tools container; returns the loop device (attach)."""
        import docker.errors
        from docker.types import Mount

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


def last_used(client: docker.DockerClient) -> dict[str, float]:
    """Every chat with a workspace, and when it was last used (epoch seconds)."""
    found: dict[str, float] = {}
    for volume in client.volumes.list():
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


def _define_mount(client: docker.DockerClient, key: str, device: str) -> None:
    """(Re)create the chat's mount volume for `device`, stamped with the time of use."""
    import docker.errors

    volumes = client.volumes
    name = volume_name(key)
    with contextlib.suppress(docker.errors.NotFound):
        volumes.get(name).remove()
    volumes.create(
        name=name,
        driver="local",
        driver_opts={"type": "ext4", "device": device, "o": WORKSPACE_MOUNT_OPTIONS},
        labels={WORKSPACE_LABEL: key, USED_LABEL: str(int(time.time()))},
    )


def _created(stamp: str | None) -> float:
    """A volume's CreatedAt (RFC 3339) as epoch seconds; now when unreadable (never delete early)."""
    try:
        return datetime.datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return time.time()
