"""`ash serve` as a real granian process: a port already taken is one line, not a traceback (a
second `ash serve` included, which granian's SO_REUSEPORT would otherwise let share the port),
and SIGTERM closes the database cleanly, leaving no WAL for the next start to recover."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess

from lib.db import connect
from tests.support.database import inbox_status
from tests.support.faults import ASH, OWNER, AshServer, Upstream, private_text, server_env, wait_until

# The server's default embeddings, so a turn's hybrid search opens its second connections too.
CONFIG = f"""owner = {OWNER}
[telegram]
stream_edit_interval = 0.2
[memory]
extraction_enabled = false
[sandbox]
enabled = false
"""


def serve(home, env, port: int) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(ASH), "serve", "--port", str(port)], env=env, cwd=home.parent, capture_output=True, text=True, timeout=30
    )


def test_a_port_in_use_is_one_line_and_touches_nothing(tmp_path):
    home = tmp_path / "data"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = serve(home, server_env(home, None), port)
    assert result.returncode == 1
    assert result.stderr == (
        f"Error: port {port} on 127.0.0.1 is already in use (another `ash serve`?): "
        "stop that process or pick another port with --port\n"
    )
    assert result.stdout == "" and not home.exists()  # refused before migrating anything


def test_a_second_server_is_refused_and_sigterm_leaves_no_wal(tmp_path, caplog):
    home = tmp_path / "data"
    home.mkdir()
    (home / "config.toml").write_text(CONFIG)
    with Upstream() as upstream:
        server = AshServer(home, server_env(home, upstream)).start()
        try:
            assert server.post_update(private_text(5001, "remember the blue door")).status_code == 200
            wait_until(lambda: inbox_status(home / "ash.db", 5001) == "done", 30, "the turn")
            second = serve(home, server.env, server.port)
            assert second.returncode == 1 and "already in use" in second.stderr
            assert "Traceback" not in second.stderr
        finally:
            # What `docker stop` does: SIGTERM to the supervisor only.
            os.kill(server.proc.pid, signal.SIGTERM)
            assert server.proc.wait(15) == 0
            server.http.close()
    assert sorted(path.name for path in home.iterdir()) == ["ash.db", "config.toml"], server.output()[-2000:]
    with caplog.at_level(logging.DEBUG, logger="ash.sqlite"):
        conn = connect(home / "ash.db")
        assert conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 2
        conn.close()
    assert "recovered" not in caplog.text


def test_the_open_file_limit_is_raised_to_fit_the_connections(monkeypatch, capsys):
    import resource

    from lib.commands import serve

    limits = {"now": (1024, resource.RLIM_INFINITY)}
    monkeypatch.setattr(serve.resource, "getrlimit", lambda _: limits["now"])
    monkeypatch.setattr(serve.resource, "setrlimit", lambda _, value: limits.update(now=value))
    # A soft limit of 1,024 (common on Linux) would stop granian accepting at about 1,000.
    assert serve.room_for_connections(4096) == 4096
    assert limits["now"] == (4096 + serve.SPARE_FILES, resource.RLIM_INFINITY)
    # A hard limit too low for them: as many as fit, and a line that says so.
    limits["now"] = (1024, 2048)
    assert serve.room_for_connections(4096) == 2048 - serve.SPARE_FILES
    assert limits["now"] == (2048, 2048)
    assert "leaves room for 1792 connections, not max_connections = 4096" in capsys.readouterr().err
