"""`ash serve`: migrate, then serve the web app with granian."""

from __future__ import annotations

import errno
import os
import resource
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


# Files beyond the connections: the database and its WAL, logs, the HTTP client's sockets, the
# sandbox's, MCP servers' pipes.
SPARE_FILES = 256


def room_for_connections(connections: int) -> int:
    """Raise the open-file limit (granian's worker inherits it) so `connections` sockets fit, as
    far as the hard limit allows; how many fit. A soft limit of 1,024, common on Linux, would
    otherwise stop accepting at about 1,000 connections."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = connections + SPARE_FILES
    if soft != resource.RLIM_INFINITY and soft < wanted:
        soft = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return connections
    fit = max(64, soft - SPARE_FILES)
    click.echo(
        f"ash: the open-file limit ({hard}) leaves room for {fit} connections, not max_connections = {connections}",
        err=True,
    )
    return fit


@click.command()
@click.option("--host", default=None, help="Address to listen on (default from config: 127.0.0.1).")
@click.option("--port", type=int, default=None, help="Port to listen on (default: $PORT, else config, else 8080).")
def serve(host: str | None, port: int | None) -> None:
    """Apply pending migrations, then serve the webhook and admin API."""
    settings = settings_or_exit()
    host = host or settings.config.server.host
    port = port or settings.config.server.port
    check_port_free(host, port)
    open_db(settings, create=True).close()
    from granian import Granian
    from granian.constants import HTTPModes, Interfaces, Loops
    from granian.http import HTTP1Settings

    # The working directory may be anywhere; the app module is importable from the install.
    os.environ.setdefault("ASH_HOME", str(settings.home))
    click.echo(f"ash: serving on http://{host}:{port} (database {settings.database_path})", err=True)
    server = settings.config.server
    # uvloop (a dependency): its futures and callbacks cost a fraction of asyncio's, and the
    # webhook's hot path is mostly those (measured: /healthz 24k -> 35k/s, webhook 7k -> 10k/s).
    # Measured on granian 2.8: each connection holds one of `backpressure` places from accept to
    # close, whatever it sends. HTTP/1 only: in "auto" mode granian first sniffs for HTTP/2 with
    # no time limit, so a connection that sends nothing held its place for ever (1,024 of them
    # stopped the server); in HTTP/1 mode the header timeout closes it. That timeout also ends
    # slow headers and idle keep-alive connections; it is body_timeout (granian's default: 30 s).
    Granian(
        "app:server",
        address=host,
        port=port,
        interface=Interfaces.ASGI,
        loop=Loops.uvloop,
        workers=1,
        http=HTTPModes.http1,
        http1_settings=HTTP1Settings(header_read_timeout=int(server.body_timeout * 1000)),
        backpressure=room_for_connections(server.max_connections),
        log_access=False,
    ).serve()
