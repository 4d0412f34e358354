"""Attack: slow uploads to any route but the webhook. 1,100 connections posting the sign-in form a
byte every 5 s held every one of granian's connection places (about 1,024), and /healthz and
Telegram's webhook went unanswered for as long as they were held.

Here, against a real `ash serve` at granian's own limit of 1,024 connections: 1,100 connections
trickle the sign-in form and are opened again as soon as they are closed; more trickle a body to
every route that takes one (found from the app's routes), without a credential, with a wrong one
and with the right one; more send nothing, or headers a byte at a time. Throughout, /healthz and
the webhook (with its secret) answer, and at the end every slow connection has been cut: bodies
without a credential got 503 at once or 408 after `body_timeout` (at most 16 read at a time),
routes that take a credential refused without reading (never 408), right credentials got 408.
"""

from __future__ import annotations

import contextlib
import json
import re
import resource
import socket
import threading
import time
from dataclasses import dataclass, field

import httpx
import pytest

from tests.support.faults import (
    OWNER,
    SECRET,
    AshServer,
    new_mcp_token,
    private_text,
    server_env,
    wait_until,
    write_config,
)

pytestmark = pytest.mark.slow

BODY_TIMEOUT = 2.0
ADMIN = "admin-token-for-tests"  # what server_env sets
SIGNIN_CONNECTIONS = 1_100
PER_ROUTE = 4
ATTACK_SECONDS = 8.0
BODY_METHODS = {"POST", "PUT", "PATCH", "DELETE"}
STATUS = re.compile(rb"^HTTP/1\.1 (\d{3}) ")


def body_routes() -> list[tuple[str, str]]:
    """(method, path) of every route that takes a body, path parameters filled in: a new route
    is attacked too. Raw ASGI routes (the webhook, /mcp) take any method."""
    from app import app

    found = []
    for route in app.routes:
        methods = getattr(route, "methods", None) or {"POST"}
        path = re.sub(r"\{[^}:]+:int\}", "1", route.path)
        path = re.sub(r"\{[^}:]+:str\}", "42", path)
        found += [(method, path) for method in sorted(set(methods) & BODY_METHODS)]
    return found


@dataclass
class Slow:
    """One connection that sends a request head (or part of one) and then a byte now and then."""

    kind: str
    head: bytes
    source: str
    sock: socket.socket | None = None
    received: bytes = b""
    closed: bool = False

    def open(self, port: int) -> Slow:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(self.source, 0))
        if self.head:
            self.sock.sendall(self.head)
        self.sock.setblocking(False)
        return self

    def poll(self) -> None:
        """Read what the server said; notice when it closed the connection."""
        while not self.closed:
            try:
                chunk = self.sock.recv(65536)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            if not chunk:
                self.closed = True
                self.sock.close()
            self.received += chunk

    def trickle(self, byte: bytes = b"x") -> None:
        if self.closed:
            return
        try:
            self.sock.send(byte)
        except BlockingIOError:
            pass
        except OSError:
            self.poll()

    @property
    def status(self) -> int | None:
        found = STATUS.match(self.received)
        return int(found.group(1)) if found else None


def head(method: str, path: str, **headers: str) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Length: 5000"]
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + b"{"


@dataclass
class Probes:
    """/healthz and the webhook, asked again and again on fresh connections while the attack runs."""

    port: int
    answers: list[tuple[str, int | str]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        update_id = 900_000
        while not self.stop.is_set():
            update_id += 1
            update = json.dumps(private_text(update_id, "still there?")).encode()
            for what, call in (
                ("healthz", lambda c: c.get("/healthz")),
                (
                    "webhook",
                    lambda c: c.post(
                        "/telegram/webhook",
                        content=update,  # noqa: B023 (called at once, in this iteration)
                        headers={"x-telegram-bot-api-secret-token": SECRET, "content-type": "application/json"},
                    ),
                ),
            ):
                # A fresh connection each time: the attack fights for connections. The timeout is
                # only a generous ceiling; the assertion is that an answer comes.
                try:
                    with httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=15) as client:
                        self.answers.append((what, call(client).status_code))
                except httpx.HTTPError as exc:
                    self.answers.append((what, type(exc).__name__))
            self.stop.wait(0.3)


@pytest.fixture
def more_files():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 8192 if hard == resource.RLIM_INFINITY else min(8192, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_strangers_slow_bodies_on_every_route_never_stop_healthz_or_the_webhook(ash_home, more_files):
    # granian's own limit, as in the report: more slow connections than it serves at once.
    write_config(ash_home)
    config = ash_home / "config.toml"
    config.write_text(
        config.read_text().replace("[server]\n", f"[server]\nbody_timeout = {BODY_TIMEOUT}\nmax_connections = 1024\n")
    )
    mcp_token = new_mcp_token(ash_home, OWNER)  # MCP is on, and this token is right
    server = AshServer(ash_home, server_env(ash_home, None)).start()
    port = server.port
    routes = body_routes()
    assert ("POST", "/admin/ui/signin") in routes and ("POST", "/mcp") in routes
    assert ("PUT", "/admin/users/42/notes") in routes and ("POST", "/telegram/webhook") in routes

    strangers = [Slow("signin", head("POST", "/admin/ui/signin"), "127.0.0.2") for _ in range(SIGNIN_CONNECTIONS)]
    others: list[Slow] = []
    for method, path in routes:
        others += [Slow(f"none {method} {path}", head(method, path), "127.0.0.3") for _ in range(PER_ROUTE)]
        wrong = {"Authorization": "Bearer ashmcp_" + "w" * 43, "X_Telegram_Bot_Api_Secret_Token": "wrong"}
        others += [Slow(f"wrong {method} {path}", head(method, path, **wrong), "127.0.0.4") for _ in range(PER_ROUTE)]
    right = [
        Slow("right admin", head("PUT", "/admin/users/42/notes", Authorization=f"Bearer {ADMIN}"), "127.0.0.5"),
        Slow("right mcp", head("POST", "/mcp", Authorization=f"Bearer {mcp_token}"), "127.0.0.5"),
        Slow("right webhook", head("POST", "/telegram/webhook", X_Telegram_Bot_Api_Secret_Token=SECRET), "127.0.0.5"),
    ]
    # Slow headers (slowloris), and connections that send nothing at all.
    headless = [Slow("nothing", b"", "127.0.0.6") for _ in range(40)]
    headless += [Slow("half a head", b"POST /admin/ui/signin HTTP/1.1\r\nHost: x", "127.0.0.6") for _ in range(40)]

    probes = Probes(port)
    prober = threading.Thread(target=probes.run, daemon=True)
    done: list[Slow] = []
    try:
        for slow in [*headless, *right, *others, *strangers]:
            slow.open(port)
        prober.start()
        started = time.monotonic()
        while time.monotonic() - started < ATTACK_SECONDS:
            for slow in [*strangers, *others, *right, *headless]:
                slow.poll()
                slow.trickle(b"x" if slow.head.endswith(b"{") else b"-")
            # The attacker opens again every sign-in connection that was closed, once a second.
            for n, slow in enumerate(strangers):
                if slow.closed:
                    done.append(slow)
                    strangers[n] = Slow("signin", slow.head, slow.source).open(port)
            time.sleep(1.0)
        probes.stop.set()
        prober.join(30)
        # /healthz and the webhook answered throughout.
        assert probes.answers, "no probe ran"
        failed = [answer for answer in probes.answers if answer[1] != 200]
        assert not failed, failed
        assert {what for what, _ in probes.answers} == {"healthz", "webhook"}

        # Every slow connection is cut, without the attacker stopping to trickle.
        everyone = [*strangers, *others, *right, *headless]

        def all_cut() -> bool:
            for slow in everyone:
                slow.poll()
                slow.trickle()
            return all(slow.closed for slow in everyone)

        wait_until(all_cut, 30, "the server to cut every slow connection")
    finally:
        probes.stop.set()
        for slow in [*strangers, *others, *right, *headless]:
            if slow.sock is not None and not slow.closed:
                with contextlib.suppress(OSError):
                    slow.sock.close()
        output = server.output()
        server.stop()

    signins = [*done, *strangers]
    statuses = {slow.status for slow in signins}
    assert statuses <= {503, 408}, statuses
    assert 503 in statuses and 408 in statuses  # the open places were all taken, and those read were cut
    assert "places for bodies without a credential are taken" in output

    for slow in others:
        path = slow.kind.split(" ", 2)[2]
        if path == "/admin/ui/signin" and slow.kind.startswith("wrong"):
            # Read or turned away, or, once this address had given enough wrong tokens
            # elsewhere, refused by the limit on failed authentications before its form.
            assert slow.status in {408, 503, 429}, (slow.kind, slow.received[:80])
        elif path.startswith("/admin/ui"):
            assert slow.status in {408, 503}, (slow.kind, slow.received[:80])
        else:  # refused before a byte of the body was read
            assert slow.status in {401, 403, 429}, (slow.kind, slow.received[:80])
    assert [slow.status for slow in right] == [408, 408, 408]
    assert all(slow.status in {None, 408} for slow in headless)

    # The webhook's updates were all stored.
    stored = server_inbox(ash_home)
    assert stored == sum(1 for what, status in probes.answers if what == "webhook" and status == 200)


def server_inbox(home) -> int:
    from lib.db import connect

    conn = connect(home / "ash.db")
    try:
        return conn.execute("SELECT count(*) FROM inbox WHERE update_id >= 900000").fetchone()[0]
    finally:
        conn.close()
