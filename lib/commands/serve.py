"""`ash serve`: migrate, then serve the web app with granian."""

from __future__ import annotations

import errno
import os
import socket

import click

from lib.commands.common import open_db, settings_or_exit


def check_port_free(host: str, port: int) -> None:
    """Stop with one sentence when nothing can listen on host:port (granian would print a Rust
    backtrace). A plain bind is refused next to granian's SO_REUSEPORT listener too, so a second
    `ash serve` is caught instead of silently sharing the port with the first."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # A server that just stopped leaves TIME_WAIT connections; they do not hold the port.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise click.ClickException(
                    f"port {port} on {host} is already in use (another `ash serve`?): "
                    "stop that process or pick another port with --port"
                ) from None
            raise click.ClickException(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


@click.command()
@click.option("--host", default=None, help="Address to listen on (default from config: 127.0.0.1).")
@click.option("--port", type=int, default=None, help="Port to listen on (default: $PORT, else config, else 8080).")
def serve(host: str | None, port: int | None) -> None:
    """Apply pending migrations, then serve the webhook and admin API."""
    settings = settings_or_exit()
    host = host or settings.config.server.host
    port = port or settings.config.server.port
    check_port_free(host, port)
    open_db(settings).close()
    from granian import Granian
    from granian.constants import Interfaces, Loops

    # The working directory may be anywhere; the app module is importable from the install.
    os.environ.setdefault("ASH_HOME", str(settings.home))
    click.echo(f"ash: serving on http://{host}:{port} (database {settings.database_path})", err=True)
    # uvloop (a dependency): its futures and callbacks cost a fraction of asyncio's, and the
    # webhook's hot path is mostly those (measured: /healthz 24k -> 35k/s, webhook 7k -> 10k/s).
    Granian(
        "app:server",
        address=host,
        port=port,
        interface=Interfaces.ASGI,
        loop=Loops.uvloop,
        workers=1,
        log_access=False,
    ).serve()
