"""Attack: a webhook body sent a byte at a time holds a connection for as long as the sender likes.
`[server] body_timeout` bounds it: 408 and the connection closed (a real granian process)."""

from __future__ import annotations

import socket
import time

import pytest

from tests.support.faults import SECRET, AshServer, server_env, write_config

pytestmark = pytest.mark.slow


def test_a_trickled_body_gets_408_and_the_connection_is_closed(tmp_path):
    home = tmp_path / "home"
    config = write_config(home)
    config.write_text(config.read_text().replace("[server]\n", "[server]\nbody_timeout = 1.0\n"))
    server = AshServer(home, server_env(home, None)).start()
    try:
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        head = (
            "POST /telegram/webhook HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            f"X-Telegram-Bot-Api-Secret-Token: {SECRET}\r\nContent-Length: 100\r\n\r\n"
        )
        sock.sendall(head.encode() + b'{"update_id": 1')
        started = time.monotonic()
        received = b""
        while b"\r\n\r\n" not in received:
            sock.sendall(b" ")  # one byte now and then, never the whole body
            time.sleep(0.2)
            sock.setblocking(False)
            try:
                received += sock.recv(4096)
            except BlockingIOError:
                pass
            finally:
                sock.setblocking(True)
            assert time.monotonic() - started < 8, "no answer while the body trickled in"
        assert received.startswith(b"HTTP/1.1 408")
        sock.settimeout(5)
        rest = b""
        while chunk := sock.recv(4096):  # b"" once the server closed the connection
            rest += chunk
        assert 0.9 <= time.monotonic() - started < 8
        assert server.http.get("/healthz").status_code == 200
    finally:
        server.stop()
