"""`ash sandbox build|status|exec|prune`: the Docker sandbox the bash tool runs in."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import click

from lib.commands.common import settings_or_exit
from lib.errors import DockerError


def _client(timeout: float = 600.0):
    from lib.sandbox.engine import connect

    try:
        return connect(timeout=timeout)
    except DockerError as exc:
        raise click.ClickException(
            f"{exc.message} (a tcp:// host also needs DOCKER_TLS_VERIFY=1 and DOCKER_CERT_PATH)"
        ) from None


@click.group()
def sandbox() -> None:
    """The Docker sandbox the bash tool runs commands in (DOCKER_HOST selects the engine)."""


@sandbox.command()
@click.option(
    "--offline",
    is_flag=True,
    help="No registry: make the root filesystem from Debian packages here and import it (docker import).",
)
@click.option(
    "--base",
    type=click.Choice(["auto", "debootstrap", "busybox"]),
    default="auto",
    show_default=True,
    help="With --offline: debootstrap (bash, coreutils, python3, curl, git; needs root and a Debian mirror), "
    "busybox (a static busybox, seconds), or auto (debootstrap when it can run, else busybox).",
)
@click.option("--mirror", default=None, help="With --offline --base debootstrap: the Debian mirror URL.")
@click.option("--image", default=None, help="Image name to build (default: sandbox.image from the config).")
def build(offline: bool, base: str, mirror: str | None, image: str | None) -> None:
    """Build the sandbox image from Containerfile.sandbox, or with --offline from Debian packages."""
    from lib.sandbox.image import DEFAULT_MIRROR, build_from_containerfile, build_offline, ensure_tools_image

    settings = settings_or_exit()
    image = image or settings.config.sandbox.image
    client = _client()
    try:
        if offline:
            image_id, used = build_offline(
                client,
                image,
                base=base,
                mirror=mirror or DEFAULT_MIRROR,
                progress=click.echo,  # type: ignore[arg-type]
            )
            click.echo(f"built {image} ({image_id[7:19]}) offline from a {used} root filesystem")
        else:
            image_id = build_from_containerfile(client, image, progress=click.echo)
            click.echo(f"built {image} ({image_id[7:19]}) from Containerfile.sandbox")
        # The maintenance image that makes and attaches each chat's /workspace filesystem.
        tools_id = ensure_tools_image(client, progress=click.echo)  # type: ignore[arg-type]
        click.echo(f"tools image ready ({tools_id[7:19]})")
    except DockerError as exc:
        hint = "" if offline else " Without a registry, use `ash sandbox build --offline`."
        raise click.ClickException(exc.message + hint) from None
    finally:
        client.close()


@sandbox.command()
def status() -> None:
    """Show the engine, the image, the limits and the running sandboxes."""
    import docker.errors

    from lib.sandbox.container import Sandbox

    settings = settings_or_exit()
    config = settings.config.sandbox
    client = _client(timeout=30)
    try:
        version = client.version()
        click.echo(f"engine:  {os.environ.get('DOCKER_HOST') or 'default socket'} (Docker {version.get('Version')})")
        try:
            image = client.images.get(config.image)
            base = (image.labels or {}).get("ash.sandbox.base", "Containerfile")
            size = image.attrs.get("Size", 0) / 1e6
            click.echo(f"image:   {config.image} {image.short_id.removeprefix('sha256:')} ({size:.0f} MB, {base})")
        except docker.errors.ImageNotFound:
            click.echo(f"image:   {config.image} MISSING: run `ash sandbox build` (or --offline)")
        network = "none" if config.network_disabled else "allowed"
        click.echo(
            f"limits:  timeout {config.timeout:g} s, memory {config.memory_limit}, cpu {config.cpu_limit:g}, "
            f"pids {config.pids_limit}, network {network}, output {config.output_limit} bytes, "
            f"idle reap {config.idle_timeout:g} s, workspace {config.workspace_limit} "
            f"(deleted after {config.workspace_ttl_days:g} days unused)"
        )
        box = Sandbox(config, client=client)
        containers = box.containers()
        click.echo(f"running: {len(containers)} sandbox container(s), {len(box.volumes())} workspace volume(s)")
        for container in containers:
            click.echo(f"  {container.name}  {container.status}")
    finally:
        client.close()


def as_command_line(words: tuple[str, ...]) -> str:
    """The shell command line COMMAND stands for: one word as it is, several quoted one by one
    (joining them with spaces split `sh -c 'echo one two'` into `sh -c echo one two`)."""
    return words[0] if len(words) == 1 else shlex.join(words)


@sandbox.command("exec")
@click.argument("command", nargs=-1, required=True)
@click.option("--chat", default=None, help="Telegram chat id whose sandbox and /workspace to use (default: a CLI one).")
def exec_(command: tuple[str, ...], chat: str | None) -> None:
    """Run COMMAND in a sandbox as the bash tool would, e.g. `ash sandbox exec -- ls -la`.

    One argument is a shell command line, as the bash tool gets it (`ash sandbox exec 'ls | wc -l'`);
    several are the words of one command, each kept whole (`ash sandbox exec -- sh -c 'echo one two'`)."""
    from lib.sandbox.container import Sandbox
    from lib.sandbox.layout import chat_key
    from lib.sandbox.output import describe

    settings = settings_or_exit()
    box = Sandbox(settings.config.sandbox, client=_client(timeout=settings.config.sandbox.timeout + 30))
    key = chat_key("telegram", chat) if chat else chat_key("cli", "local")
    try:
        result = box.run_sync(key, as_command_line(command))
    except DockerError as exc:
        raise click.ClickException(exc.message) from None
    finally:
        box.close()
    click.echo(describe(result, settings.config.sandbox))
    # Like coreutils `timeout`: 124 when the time limit killed the command.
    sys.exit(124 if result.exit_code is None else result.exit_code)


@sandbox.command()
def sweep() -> None:
    """Remove idle sandbox containers and delete workspaces unused past sandbox.workspace_ttl_days."""
    from lib.sandbox.container import Sandbox

    settings = settings_or_exit()
    box = Sandbox(settings.config.sandbox, client=_client(timeout=60), sweeper=False)
    try:
        box.sweep()  # first sight: containers of other processes are timed from now
        stopped, deleted = box.sweep()
    except DockerError as exc:
        raise click.ClickException(exc.message) from None
    finally:
        box.close()
    click.echo(f"removed {stopped} idle container(s), deleted {deleted} expired workspace(s)")


@sandbox.command()
@click.option("--volumes", is_flag=True, help="Also delete every chat's /workspace volume (their files are lost).")
@click.option("--yes", is_flag=True, help="Do not ask before deleting volumes.")
def prune(volumes: bool, yes: bool) -> None:
    """Remove every sandbox container (they restart on the next command); --volumes also wipes workspaces."""
    from lib.sandbox.container import Sandbox

    settings = settings_or_exit()
    if volumes and not yes:
        click.confirm("Delete every chat's /workspace files?", abort=True)
    box = Sandbox(settings.config.sandbox, client=_client(timeout=60))
    try:
        containers, gone = box.prune(volumes=volumes)
    except DockerError as exc:
        raise click.ClickException(exc.message) from None
    finally:
        box.close()
    click.echo(f"removed {containers} container(s)" + (f" and {gone} volume(s)" if volumes else ""))


@sandbox.command()
@click.option("--app", "app_name", required=True, help="The Fly app that runs dockerd: the server is <app>.internal.")
@click.option(
    "--out", type=click.Path(path_type=Path), default=Path("docker-certs"), show_default=True, help="Folder to write."
)
@click.option("--name", "names", multiple=True, help="Another host name or IP the server answers on (repeatable).")
def certs(app_name: str, out: Path, names: tuple[str, ...]) -> None:
    """Make a CA, a server certificate for dockerd on <app>.internal and a client certificate for Ash.

    OUT/server/ goes to the Docker host (dockerd --tlsverify); OUT/client/ is Ash's DOCKER_CERT_PATH
    (its key as a Fly secret file); OUT/ca/ca-key.pem stays with you, never on either machine.
    """
    from lib.sandbox.certs import make_certificates

    folders = make_certificates(out, app_name, list(names))
    click.echo(f"server (for dockerd on {app_name}.internal): {folders['server']}")
    click.echo(f"client (Ash's DOCKER_CERT_PATH): {folders['client']}")
    click.echo(f"CA key (keep it here, offline): {folders['ca'] / 'ca-key.pem'}")
