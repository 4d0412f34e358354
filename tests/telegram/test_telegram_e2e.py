"""End to end: a real `ash serve` (granian) process, a local stub Bot API and a stub Anthropic API.

The server is SIGKILLed in the middle of a turn (after the 200, after its first streamed
message, before the answer), restarted, and the user must end with exactly one message for the
update, carrying the whole answer.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from tests.support.database import inbox_row, inbox_status
from tests.support.faults import ASH, free_port, wait_until
from tests.support.paths import FIXTURES, REPO
from tests.support.telegram import SECRET, TOKEN, load, private_text

pytestmark = pytest.mark.slow


SSE = (FIXTURES / "anthropic" / "stream_text.sse").read_bytes()
USER = 408258968


class Stub:
    """Telegram Bot API and Anthropic Messages API on one local port; records what it saw."""

    def __init__(self):
        self.lock = threading.Lock()
        self.calls: list[tuple[str, dict]] = []
        self.messages: dict[int, dict] = {}
        self.llm_requests = 0
        self.release = threading.Event()  # set at teardown to end a hanging stream
        self.next_id = 100
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                self._json({"ok": False, "error_code": 404, "description": "Not Found"}, 404)

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                if self.path.startswith("/v1/messages"):
                    return stub.llm(self)
                method = self.path.rsplit("/", 1)[1]
                self._json(*stub.telegram(method, json.loads(body or b"{}")))

            def _json(self, payload, status=200):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def telegram(self, method: str, body: dict) -> tuple[dict, int]:
        with self.lock:
            self.calls.append((method, body))
            if method == "getMe":
                return load("getMe_ok.json"), 200
            if method == "sendMessage":
                self.next_id += 1
                self.messages[self.next_id] = {"chat_id": body["chat_id"], "text": body["text"]}
                sent = load("sendMessage_ok.json")
                sent["result"].update(message_id=self.next_id, text=body["text"])
                return sent, 200
            if method == "editMessageText":
                message = self.messages.get(body["message_id"])
                if message is None:
                    return {"ok": False, "error_code": 400, "description": "Bad Request: message not found"}, 400
                if message["text"] == body["text"]:
                    return load("error_400_message_not_modified_ASSEMBLED.json"), 400
                message["text"] = body["text"]
                return load("editMessageText_ok.json"), 200
            return {"ok": True, "result": True}, 200

    def llm(self, handler: BaseHTTPRequestHandler) -> None:
        with self.lock:
            self.llm_requests += 1
            first = self.llm_requests == 1
        handler.send_response(200)
        handler.send_header("content-type", "text/event-stream")
        handler.end_headers()
        events = SSE.split(b"\n\n")
        if first:
            # Stream the first words, then hang: the turn is mid-flight when the server dies.
            head = [e for e in events if b'"Hello"' not in e][:3] + [e for e in events if b'"Hello"' in e]
            handler.wfile.write(b"\n\n".join(head) + b"\n\n")
            handler.wfile.flush()
            self.release.wait(60)
            return
        handler.wfile.write(SSE)

    def sent_to(self, chat_id: int) -> list[dict]:
        with self.lock:
            return [m for _, m in sorted(self.messages.items()) if str(m["chat_id"]) == str(chat_id)]

    def close(self):
        self.release.set()
        self.server.shutdown()


class Server:
    """`ash serve` in its own process group."""

    def __init__(self, env: dict, port: int, log: Path):
        self.port = port
        self.log = log.open("ab")
        self.proc = subprocess.Popen(
            [str(ASH), "serve", "--port", str(port)],
            env=env,
            cwd=str(REPO),
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        wait_until(self.healthy, 30, "the server to answer /healthz")

    def healthy(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"ash serve exited with {self.proc.returncode}")
        try:
            return httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def post_update(self, update: dict) -> httpx.Response:
        return httpx.post(
            f"http://127.0.0.1:{self.port}/telegram/webhook",
            content=json.dumps(update).encode(),
            headers={"x-telegram-bot-api-secret-token": SECRET, "content-type": "application/json"},
            timeout=5,
        )

    def kill(self, sig=signal.SIGKILL):
        os.killpg(self.proc.pid, sig)
        self.proc.wait(20)
        self.log.close()


@pytest.fixture
def stub():
    server = Stub()
    yield server
    server.close()


@pytest.fixture
def server_env(tmp_path, stub) -> dict:
    home = tmp_path / "home"
    home.mkdir()
    home.joinpath("config.toml").write_text(
        f'[telegram]\nallowed_users = [{USER}]\n\n[embeddings]\nprovider = "none"\n\n'
        "[memory]\nextraction_enabled = false\ncompaction_enabled = false\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ASH_", "TELEGRAM_", "ANTHROPIC_", "OPENAI_"))}
    env.update(
        ASH_HOME=str(home),
        TELEGRAM_BOT_TOKEN=TOKEN,
        TELEGRAM_WEBHOOK_SECRET=SECRET,
        TELEGRAM_API_BASE=stub.url,
        ANTHROPIC_API_KEY="test-key",
        ANTHROPIC_BASE_URL=stub.url,
        PYTHONUNBUFFERED="1",
    )
    return env


@pytest.mark.skipif(sys.platform == "win32", reason="process groups and SIGKILL")
def test_sigkill_mid_turn_then_restart_gives_exactly_one_message_with_the_answer(tmp_path, stub, server_env):
    db = Path(server_env["ASH_HOME"]) / "ash.db"
    port = free_port()
    log = tmp_path / "server.log"
    update = private_text(777001, "Say hello")

    first = Server(server_env, port, log)
    try:
        assert first.post_update(update).status_code == 200
        # The turn streamed its first words into a message and stored that message's id.
        wait_until(lambda: stub.sent_to(USER), 30, "the first streamed message")
        wait_until(lambda: (inbox_row(db, 777001) or {}).get("reply_message_id"), 10, "the reply id in the inbox")
        assert stub.llm_requests == 1
    finally:
        first.kill(signal.SIGKILL)
    started = stub.sent_to(USER)
    assert len(started) == 1 and started[0]["text"] != "Hello there!"

    second = Server(server_env, free_port(), log)
    try:
        # Telegram retries the update it may not have seen acknowledged: still one answer.
        assert second.post_update(update).status_code == 200
        wait_until(lambda: inbox_status(db, 777001) == "done", 60, "the resumed turn to finish")
    finally:
        second.kill(signal.SIGTERM)

    messages = stub.sent_to(USER)
    assert [m["text"] for m in messages] == ["Hello there!"], log.read_text()[-3000:]
    assert [m for m, _ in stub.calls].count("sendMessage") == 1
    assert stub.llm_requests == 2
