"""Build the sandbox image: from Containerfile.sandbox, or offline from Debian packages.

Online (`ash sandbox build`): the Docker host builds `Containerfile.sandbox`, pulling its base.
Offline (`--offline`, no registry): a root filesystem is made here, then streamed as a tar
through a pipe into the Engine API's import (`POST /images/create?fromSrc=-`), the API form of
`docker import`. Two bases:

- `debootstrap`: Debian minbase plus bash, coreutils, python3, curl, git (needs root, the
  `debootstrap` command and a Debian mirror; 2 to 3.5 minutes and 202 MB here);
- `busybox`: Debian's static busybox alone (a shell and ~400 applets, 2 MB, seconds, no root).

`auto` picks debootstrap when it can run and falls back to busybox.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from lib.config import REPO_ROOT
from lib.errors import DockerError

if TYPE_CHECKING:
    import docker

# Who commands run as, where, and the only environment they see (layout.py and container.py
# import these; they live here so that the image build needs nothing from the other modules).
SANDBOX_USER = "1000:1000"
WORKDIR = "/workspace"
# Secrets live in Ash's process, never here.
SANDBOX_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": WORKDIR,
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
    "TERM": "dumb",
}
# The image of the short-lived maintenance containers that attach each chat's workspace image
# to a loop device: always static busybox (truncate, mke2fs, losetup, mount), whatever the
# sandbox image is.
TOOLS_IMAGE = "ash-sandbox-tools:latest"
CONTAINERFILE = REPO_ROOT / "Containerfile.sandbox"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEFAULT_SUITE = "bookworm"
PACKAGES = ("bash", "coreutils", "procps", "python3", "curl", "git", "ca-certificates")
# Bulk that a shell sandbox does not need (documentation, translations, package caches).
PRUNE = ("usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale", "var/cache/apt", "var/lib/apt/lists")
UID, GID = (int(part) for part in SANDBOX_USER.split(":"))
PASSWD = f"root:x:0:0:root:/root:/bin/sh\nsandbox:x:{UID}:{GID}:sandbox:{WORKDIR}:/bin/sh\n"
GROUP = f"root:x:0:\nsandbox:x:{GID}:\n"

Base = Literal["auto", "debootstrap", "busybox"]
Progress = Callable[[str], None]


def split_tag(image: str) -> tuple[str, str]:
    """`name:tag` into its parts (a registry port is not a tag)."""
    name, sep, tag = image.rpartition(":")
    if not sep or "/" in tag:
        return image, "latest"
    return name, tag


def image_changes(base: str) -> list[str]:
    """Dockerfile instructions applied on import, so an imported image matches the Containerfile."""
    env = [f"ENV {key}={value}" for key, value in SANDBOX_ENV.items()]
    return [f"USER {SANDBOX_USER}", f"WORKDIR {WORKDIR}", *env, f"LABEL ash.sandbox.base={base}", 'CMD ["/bin/sh"]']


def build_from_containerfile(client: docker.DockerClient, image: str, progress: Progress = print) -> str:
    """Build Containerfile.sandbox on the Docker host (it pulls the base image); returns the image id."""
    import docker.errors

    with CONTAINERFILE.open("rb") as containerfile:
        try:
            for event in client.api.build(fileobj=containerfile, tag=image, rm=True, forcerm=True, decode=True):
                if "error" in event:
                    raise DockerError(None, f"image build failed: {event['error'].strip()}")
                if event.get("stream", "").strip():
                    progress(event["stream"].rstrip())
        except docker.errors.APIError as exc:
            raise DockerError(exc.status_code, f"image build failed: {exc.explanation or exc}") from None
    return client.images.get(image).id


def build_offline(
    client: docker.DockerClient,
    image: str,
    *,
    base: Base = "auto",
    mirror: str = DEFAULT_MIRROR,
    suite: str = DEFAULT_SUITE,
    progress: Progress = print,
) -> tuple[str, str]:
    """Make a root filesystem from Debian packages and import it; returns (image id, base used)."""
    if base == "auto":
        base = "debootstrap" if can_debootstrap() else "busybox"
        if base == "debootstrap":
            try:
                return build_offline(client, image, base="debootstrap", mirror=mirror, suite=suite, progress=progress)
            except DockerError as exc:
                if exc.status is not None:  # the engine refused the import: no point retrying
                    raise
                progress(f"debootstrap failed ({exc.message}); falling back to busybox")
                base = "busybox"
    if base == "busybox":
        busybox = find_static_busybox(progress)
        progress(f"rootfs: static busybox from {busybox}")
        return _import(client, image, lambda tar: busybox_layout(tar, busybox), "busybox"), "busybox"
    with tempfile.TemporaryDirectory(prefix="ash-rootfs-") as tmp:
        root = Path(tmp) / "root"
        debootstrap(root, mirror=mirror, suite=suite, progress=progress)
        return _import(client, image, lambda tar: directory_layout(tar, root), "debootstrap"), "debootstrap"


def ensure_tools_image(client: docker.DockerClient, progress: Progress | None = None) -> str:
    """The maintenance image (static busybox), imported on first use; returns its id."""
    import docker.errors

    try:
        return client.images.get(TOOLS_IMAGE).id
    except docker.errors.ImageNotFound:
        pass
    except docker.errors.APIError as exc:
        raise DockerError(exc.status_code, f"Docker engine error: {exc.explanation or exc}") from None
    image_id, _ = build_offline(client, TOOLS_IMAGE, base="busybox", progress=progress or (lambda line: None))
    return image_id


def can_debootstrap() -> bool:
    """debootstrap needs its command and root (it chroots)."""
    return shutil.which("debootstrap") is not None and os.geteuid() == 0


def debootstrap(root: Path, *, mirror: str, suite: str, progress: Progress) -> None:
    """A Debian minbase root with the sandbox's packages, its user and a /workspace, trimmed."""
    progress(f"rootfs: debootstrap {suite} minbase + {', '.join(PACKAGES)} from {mirror}")
    command = ["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", suite, str(root), mirror]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        tail = (result.stdout + result.stderr).strip().splitlines()[-3:]
        raise DockerError(None, "debootstrap failed: " + " | ".join(tail))
    for relative in PRUNE:
        shutil.rmtree(root / relative, ignore_errors=True)
    with (root / "etc/passwd").open("a") as passwd:
        passwd.write(f"sandbox:x:{UID}:{GID}:sandbox:{WORKDIR}:/bin/bash\n")
    with (root / "etc/group").open("a") as group:
        group.write(f"sandbox:x:{GID}:\n")
    workspace = root / WORKDIR.lstrip("/")
    workspace.mkdir(mode=0o700, exist_ok=True)
    os.chown(workspace, UID, GID)


def find_static_busybox(progress: Progress = print) -> Path:
    """A statically linked busybox: the host's (Debian busybox-static), else the .deb's, downloaded."""
    for candidate in (Path("/bin/busybox"), Path("/usr/bin/busybox")):
        if candidate.is_file() and _is_static(candidate):
            return candidate
    progress("no static busybox on this host; fetching Debian's busybox-static package")
    target = Path(tempfile.mkdtemp(prefix="ash-busybox-"))
    download = subprocess.run(
        ["apt-get", "download", "busybox-static"], cwd=target, capture_output=True, text=True, check=False
    )
    debs = list(target.glob("busybox-static_*.deb"))
    if download.returncode != 0 or not debs:
        raise DockerError(
            None, "no static busybox: install Debian's busybox-static (apt-get install busybox-static) and retry"
        )
    subprocess.run(["dpkg-deb", "-x", str(debs[0]), str(target / "x")], check=True)
    return target / "x/bin/busybox"


def _is_static(path: Path) -> bool:
    # A dynamic ELF names its loader (PT_INTERP) within the first few hundred bytes.
    head = path.read_bytes()[:4096]
    return head.startswith(b"\x7fELF") and b"ld-linux" not in head and b"ld-musl" not in head


def _entry(name: str, kind: bytes, mode: int, uid: int = 0, gid: int = 0) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.uid, info.gid = uid, gid
    return info


def busybox_layout(tar: tarfile.TarFile, busybox: Path) -> None:
    """Write a busybox root filesystem into `tar`: no file on disk, no root needed."""
    for directory in ("bin", "sbin", "usr", "usr/bin", "usr/sbin", "etc", "proc", "sys", "dev", "var"):
        tar.addfile(_entry(directory, tarfile.DIRTYPE, 0o755))
    tar.addfile(_entry("root", tarfile.DIRTYPE, 0o700))
    tar.addfile(_entry("tmp", tarfile.DIRTYPE, 0o1777))
    tar.addfile(_entry("var/tmp", tarfile.DIRTYPE, 0o1777))
    tar.addfile(_entry(WORKDIR.lstrip("/"), tarfile.DIRTYPE, 0o700, UID, GID))
    binary = _entry("bin/busybox", tarfile.REGTYPE, 0o755)
    binary.size = busybox.stat().st_size
    with busybox.open("rb") as source:
        tar.addfile(binary, source)
    listing = subprocess.run([str(busybox), "--list-full"], capture_output=True, text=True, check=True).stdout
    for applet in sorted(set(listing.split())):
        if applet == "bin/busybox":
            continue
        link = _entry(applet, tarfile.SYMTYPE, 0o777)
        link.linkname = "/bin/busybox"
        tar.addfile(link)
    for name, text in (("etc/passwd", PASSWD), ("etc/group", GROUP)):
        data = text.encode()
        info = _entry(name, tarfile.REGTYPE, 0o644)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))


def directory_layout(tar: tarfile.TarFile, root: Path) -> None:
    """Write a root directory into `tar`, keeping owners and modes; the engine provides /dev."""

    def skip_devices(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        return None if info.name.startswith("dev/") else info

    for child in sorted(root.iterdir()):
        tar.add(str(child), arcname=child.name, recursive=True, filter=skip_devices)


def _tar_stream(write: Callable[[tarfile.TarFile], None]) -> Iterator[bytes]:
    """The tar `write` produces, read from a pipe as it is written (nothing held in memory)."""
    read_fd, write_fd = os.pipe()
    failure: list[BaseException] = []

    def writer() -> None:
        try:
            with (
                os.fdopen(write_fd, "wb") as pipe,
                tarfile.open(fileobj=pipe, mode="w|", format=tarfile.PAX_FORMAT) as tar,
            ):
                write(tar)
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=writer, name="ash-rootfs-tar", daemon=True)
    thread.start()
    with os.fdopen(read_fd, "rb") as pipe:
        while chunk := pipe.read(1 << 20):
            yield chunk
    thread.join()
    if failure:
        raise DockerError(None, f"could not write the root filesystem: {failure[0]}")


def _import(client: docker.DockerClient, image: str, write: Callable[[tarfile.TarFile], None], base: str) -> str:
    """Stream a root filesystem tar into `POST /images/create?fromSrc=-`; returns the image id."""
    import docker.errors

    repository, tag = split_tag(image)
    try:
        client.api.import_image_from_stream(
            _tar_stream(write), repository=repository, tag=tag, changes=image_changes(base)
        )
        return client.images.get(image).id
    except docker.errors.APIError as exc:
        raise DockerError(exc.status_code, f"image import failed: {exc.explanation or exc}") from None
