"""Real-process helpers for fault and security tests: a stub upstream (Bot API, Anthropic, OpenAI)
served over loopback, and `ash serve` run as a real granian process pointed at it.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from tests.support import telegram
from tests.support.paths import FIXTURES, REPO
from tests.support.telegram import SECRET, TOKEN, load

ASH = REPO / ".venv" / "bin" / "ash"

OWNER = 408258968
NOT_FOUND = "Bad Request: message to edit not found"


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
    """Poll `predicate` until it returns something truthy; fail the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def private_text(update_id: int, text: str, user_id: int = OWNER) -> dict:
    """The recorded private text update with another id, text and sender (named after their id)."""
    return telegram.private_text(update_id, text, user_id, username=f"user{user_id}")


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _last_user_text(body: dict) -> str:
    for message in reversed(body.get("messages", [])):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        texts = [block.get("text", "") for block in content if isinstance(block, dict) and block.get("type") == "text"]
        if texts:
            return texts[-1]
    return ""


def _message_start(message_id: str) -> tuple[str, dict]:
    """The opening event of a Messages API stream, as recorded."""
    message = {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": "claude-sonnet-4-6",
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 11, "output_tokens": 1},
    }
    return "message_start", {"type": "message_start", "message": message}


def _message_end(stop_reason: str, output_tokens: int) -> list[tuple[str, dict]]:
    """The closing events of a Messages API stream: why it stopped and the output usage."""
    delta = {"stop_reason": stop_reason, "stop_sequence": None}
    return [
        ("message_delta", {"type": "message_delta", "delta": delta, "usage": {"output_tokens": output_tokens}}),
        ("message_stop", {"type": "message_stop"}),
    ]


def _sse_event(name: str, data: dict) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def anthropic_sse(text: str, pieces: int = 3) -> list[bytes]:
    """A Messages API event stream answering `text`, in the recorded stream_text.sse's shape."""
    block = {"type": "text", "text": ""}
    events = [
        _message_start("msg_stub"),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
    ]
    step = max(1, len(text) // pieces + 1)
    for start in range(0, len(text), step):
        delta = {"type": "text_delta", "text": text[start : start + step]}
        events.append(("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}))
    events.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
    events += _message_end("end_turn", 6)
    return [_sse_event(name, data) for name, data in events]


def anthropic_tool_use(name: str, tool_input: dict, tool_id: str = "toolu_stub_1") -> bytes:
    """A Messages API event stream in which the model calls one tool."""
    block = {"type": "tool_use", "id": tool_id, "name": name, "input": {}}
    delta = {"type": "input_json_delta", "partial_json": json.dumps(tool_input)}
    events = [
        _message_start("msg_stub_tool"),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        *_message_end("tool_use", 9),
    ]
    return b"".join(_sse_event(n, d) for n, d in events)


def anthropic_message(text: str) -> dict:
    """A non-streamed Messages API answer, the recorded messages_text.json with other text."""
    message = json.loads((FIXTURES / "anthropic" / "messages_text.json").read_text(encoding="utf-8"))
    message["content"] = [{"type": "text", "text": text}]
    return message


def openai_sse(text: str) -> bytes:
    """A Chat Completions event stream answering `text`, in the recorded chunks' shape."""
    base = {"id": "chatcmpl-stub", "object": "chat.completion.chunk", "created": 1782955818, "model": "gpt-4o"}
    chunks = [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {**base, "choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 6, "total_tokens": 17}},
    ]
    return "".join(f"data: {json.dumps(c)}\n\n" for c in chunks).encode() + b"data: [DONE]\n\n"


@dataclass
class Failure:
    """One canned error response served instead of the normal one."""

    status: int
    body: dict
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Slow:
    """The normal answer, `seconds` late: a Bot API call answered late, or a model stream whose
    pieces are spread over `seconds` (the turn stays mid-stream that long)."""

    seconds: float


@dataclass
class Stall:
    """A model stream that sends its first words, goes quiet for `seconds`, then drops the
    connection without finishing (the client sees a stream that died mid-answer)."""

    seconds: float


@dataclass
class Late:
    """A Bot API call carried out at once, its answer sent `seconds` later: Telegram has shown the
    message or the edit, and the caller does not know yet (a kill or a cancellation meanwhile
    leaves it done at Telegram and unrecorded at Ash)."""

    seconds: float


# What `Upstream.decide` may answer for one request (None: the normal answer at once).
Fault = Failure | Slow | Stall | Late


class _StubServer(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver listens with a backlog of 5: a server under test opening dozens of connections
    # at once (a soak) would see some refused, and retry model calls nobody decided to fail.
    request_queue_size = 256


def _quiet_on_reset(request, client_address) -> None:
    """The server under test was killed or closed a connection mid-request: nothing to report.
    Anything else is printed as socketserver does."""
    if not isinstance(sys.exc_info()[1], ConnectionError):
        traceback.print_exc()


class Upstream:
    """A loopback stand-in for the Bot API, Anthropic and OpenAI, recording everything it was sent.

    `fail[key]` queues Failures served before normal answers: keys are Bot API method names,
    "anthropic" and "openai". `hold_anthropic` (an Event) makes the Anthropic stream send its
    first piece and then wait for the event before the rest, which pins a turn mid-stream.
    `decide(key, body)`, when set, is asked about every request the queues leave alone and may
    answer with a Fault for it (a soak's plan). Each message keeps every text it showed, in order
    (`history`); `migrated` maps a group's old id to its supergroup's, and a message sent (or an
    action) to the old id is then refused with Telegram's 400 carrying `migrate_to_chat_id`.
    """

    def __init__(self, reply: Callable[[str], str] | None = None):
        self.reply = reply or (lambda text: f"Echo: {text}")
        self.lock = threading.Lock()
        self.calls: list[tuple[str, dict, dict]] = []  # (key, json body, headers)
        self.keep_headers = True
        self.messages: dict[int, dict] = {}
        self.fail: dict[str, list[Failure]] = {}
        self.hold_anthropic: threading.Event | None = None
        # Event streams served (in order) before the echo answers: e.g. a tool call.
        self.anthropic_script: list[bytes] = []
        # sendMessage bodies this accepts are never answered nor recorded, as if Telegram never got
        # them: the request hangs until the upstream closes. `swallowed` is set when one arrives.
        self.swallow: Callable[[dict], bool] | None = None
        self.swallowed = threading.Event()
        self.decide: Callable[[str, dict], Fault | None] | None = None
        self.migrated: dict[int, int] = {}
        # Chats whose person blocked the bot: every write to them is refused with 403.
        self.blocked: set[int] = set()
        self.deleted: list[int] = []
        # Model streams being served right now (a turn is mid-stream while this is above 0).
        self.streaming = 0
        self._closing = threading.Event()
        self.next_id = 7000
        self.server = _StubServer(("127.0.0.1", 0), self._handler_class())
        self.server.handle_error = _quiet_on_reset
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> Upstream:
        self.thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._closing.set()
        if self.hold_anthropic is not None:
            self.hold_anthropic.set()
        self.server.shutdown()
        self.server.server_close()

    # -- what tests read --------------------------------------------------------------------
    def count(self, key: str) -> int:
        with self.lock:
            return sum(1 for k, _, _ in self.calls if k == key)

    def sent_to(self, chat_id: int | str) -> list[dict]:
        """Messages the bot created in a chat, in order, with their latest text."""
        with self.lock:
            return [copy.deepcopy(m) for _, m in sorted(self.messages.items()) if str(m["chat_id"]) == str(chat_id)]

    def texts_to(self, chat_id: int | str) -> list[str]:
        return [m["text"] for m in self.sent_to(chat_id)]

    # -- serving ----------------------------------------------------------------------------
    def _take_failure(self, key: str) -> Failure | None:
        with self.lock:
            queued = self.fail.get(key)
            return queued.pop(0) if queued else None

    def _telegram(self, method: str, body: dict) -> tuple[int, dict]:
        with self.lock:
            if method == "getMe":
                return 200, load("getMe_ok.json")
            if method == "getMyCommands":
                return 200, {"ok": True, "result": []}
            if _int(body.get("chat_id")) in self.blocked and method != "getMe":
                return 403, load("error_403_bot_blocked_by_user.json")
            moved_to = self.migrated.get(_int(body.get("chat_id")))
            if moved_to is not None and method in ("sendMessage", "sendChatAction"):
                return 400, {
                    "ok": False,
                    "error_code": 400,
                    "description": "Bad Request: group chat was upgraded to a supergroup chat",
                    "parameters": {"migrate_to_chat_id": moved_to},
                }
            if method == "deleteMessage":
                if self.messages.pop(body.get("message_id"), None) is None:
                    gone = "Bad Request: message to delete not found"
                    return 400, {"ok": False, "error_code": 400, "description": gone}
                self.deleted.append(body["message_id"])
                return 200, {"ok": True, "result": True}
            if method == "sendMessage":
                self.next_id += 1
                self.messages[self.next_id] = {
                    "chat_id": body["chat_id"],
                    "text": body["text"],
                    "edits": 0,
                    "history": [body["text"]],
                    "message_thread_id": body.get("message_thread_id"),
                    "reply_to": (body.get("reply_parameters") or {}).get("message_id"),
                    "sent_at": time.time(),
                }
                sent = copy.deepcopy(load("sendMessage_ok.json"))
                sent["result"].update(message_id=self.next_id, text=body["text"])
                sent["result"]["chat"]["id"] = body["chat_id"]
                return 200, sent
            if method == "editMessageText":
                message = self.messages.get(body.get("message_id"))
                if message is None:
                    return 400, {
                        "ok": False,
                        "error_code": 400,
                        "description": "Bad Request: message to edit not found",
                    }
                if message["text"] == body["text"]:
                    return 400, load("error_400_message_not_modified_ASSEMBLED.json")
                message.update(text=body["text"], edits=message["edits"] + 1)
                message["history"].append(body["text"])
                return 200, load("editMessageText_ok.json")
        return 200, {"ok": True, "result": True}

    def _handler_class(self):
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # keep pytest output clean
                return

            def _reply(self, status: int, payload: dict | bytes, headers: dict[str, str] | None = None) -> None:
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                content_type = "text/event-stream" if isinstance(payload, bytes) else "application/json"
                self.send_header("content-type", content_type)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._reply(404, {"ok": False, "error_code": 404, "description": "Not Found"})

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                path = self.path.split("?", 1)[0]
                if path.startswith("/bot"):
                    key = path.rsplit("/", 1)[1]
                elif path.endswith("/messages"):
                    key = "anthropic"
                elif path.endswith("/chat/completions"):
                    key = "openai"
                else:
                    self._reply(404, {"error": "unknown path"})
                    return
                with upstream.lock:
                    upstream.calls.append((key, body, dict(self.headers) if upstream.keep_headers else {}))
                if key == "sendMessage" and upstream.swallow is not None and upstream.swallow(body):
                    upstream.swallowed.set()
                    upstream._closing.wait(60)
                    self.close_connection = True
                    return
                failure = upstream._take_failure(key)
                if failure is None and upstream.decide is not None:
                    failure = upstream.decide(key, body)
                if isinstance(failure, Failure):
                    self._reply(failure.status, failure.body, failure.headers)
                    return
                late = key != "anthropic" and isinstance(failure, Slow)
                if late and (upstream._closing.wait(failure.seconds) or self._caller_gone()):
                    # Nobody waits for this answer any more (the server was killed): the request
                    # is dropped unserved, as one lost on its way would be.
                    self.close_connection = True
                    return
                try:
                    if key == "anthropic":
                        self._anthropic(body, failure)
                    elif key == "openai":
                        self._reply(200, openai_sse(upstream.reply(_last_user_text(body))))
                    else:
                        status, payload = upstream._telegram(key, body)
                        if isinstance(failure, Late):
                            upstream._closing.wait(failure.seconds)
                        self._reply(status, payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the server under test was killed mid-response

            def _caller_gone(self) -> bool:
                """True when the client closed its end of the connection."""
                try:
                    return self.connection.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
                except BlockingIOError:
                    return False
                except OSError:
                    return True

            def _anthropic(self, body: dict, fault: Slow | Stall | None = None) -> None:
                with upstream.lock:
                    scripted = upstream.anthropic_script.pop(0) if upstream.anthropic_script else None
                if scripted is not None:
                    self._reply(200, scripted)
                    return
                text = upstream.reply(_last_user_text(body))
                if not body.get("stream"):
                    self._reply(200, anthropic_message(text))
                    return
                pieces = anthropic_sse(text)
                if fault is not None:
                    self._paced(pieces, fault)
                    return
                hold = upstream.hold_anthropic
                if hold is None:
                    self._reply(200, b"".join(pieces))
                    return
                # Stream without a length: the first text piece now, the rest once released.
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                first = next(i for i, p in enumerate(pieces) if b"text_delta" in p)
                self.wfile.write(b"".join(pieces[: first + 1]))
                self.wfile.flush()
                hold.wait(60)
                self.wfile.write(b"".join(pieces[first + 1 :]))
                self.wfile.flush()
                self.close_connection = True

            def _paced(self, pieces: list[bytes], fault: Slow | Stall) -> None:
                """A stream without a length, its pieces spread over a Slow's seconds; a Stall sends
                up to the first words, waits, and closes the connection mid-stream."""
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                self.close_connection = True
                with upstream.lock:
                    upstream.streaming += 1
                try:
                    self._pieces(pieces, fault)
                finally:
                    with upstream.lock:
                        upstream.streaming -= 1

            def _pieces(self, pieces: list[bytes], fault: Slow | Stall) -> None:
                if isinstance(fault, Stall):
                    first = next(i for i, p in enumerate(pieces) if b"text_delta" in p)
                    self.wfile.write(b"".join(pieces[: first + 1]))
                    self.wfile.flush()
                    upstream._closing.wait(fault.seconds)
                    return
                pause = fault.seconds / max(1, len(pieces) - 1)
                for piece in pieces:
                    self.wfile.write(piece)
                    self.wfile.flush()
                    if upstream._closing.wait(pause):
                        return

        return Handler


CONFIG = """
owner = {owner}

[server]
tick_interval = 1.0

[telegram]
allowed_users = {allowed}
stream_edit_interval = 0.2
lease_seconds = 30.0

[memory]
extraction_enabled = false
consolidate_daily_tokens = 0

[embeddings]
provider = "none"

[agent]
llm_retries = 2
"""


def write_config(home: Path, allowed: list[int] | None = None, extra: str = "") -> Path:
    """A config.toml for tests: fast ticks, no embeddings model, no background extraction and no
    consolidation model pass (the stub upstreams answer only what each test expects)."""
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.toml"
    path.write_text(CONFIG.format(owner=OWNER, allowed=json.dumps(allowed or [])) + extra, encoding="utf-8")
    return path


def server_env(home: Path, upstream: Upstream | None, **overrides: str) -> dict[str, str]:
    """The environment of an `ash serve` process under test (secrets are the test's values)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ASH_", "TELEGRAM_", "ANTHROPIC_", "OPENAI_"))}
    env.update(
        ASH_HOME=str(home),
        TELEGRAM_BOT_TOKEN=TOKEN,
        TELEGRAM_WEBHOOK_SECRET=SECRET,
        ANTHROPIC_API_KEY="sk-ant-test-key",
        ASH_ADMIN_TOKEN="admin-token-for-tests",
    )
    if upstream is not None:
        env.update(
            TELEGRAM_API_BASE=upstream.origin,
            ANTHROPIC_BASE_URL=upstream.origin,
            OPENAI_BASE_URL=upstream.origin + "/v1",
        )
    env.update(overrides)
    return env


def run_ash(home: Path, *args: str) -> str:
    """Run an `ash` command against this home, as the operator would; its stdout."""
    done = subprocess.run(
        [str(ASH), *args], env=server_env(home, None), capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout


def new_mcp_token(home: Path, user: str | int, *extra: str) -> str:
    """`ash mcp token create --user USER`; the token is alone on the last line."""
    return run_ash(home, "mcp", "token", "create", "--user", str(user), *extra).strip().splitlines()[-1]


class AshServer:
    """`ash serve` as a real process on a free port, its output captured in a file."""

    def __init__(
        self, home: Path, env: dict[str, str], name: str = "ash", verbose: bool = False, port: int | None = None
    ):
        self.verbose = verbose
        self.home = home
        self.env = env
        # A restarted server may take its predecessor's port, so deliveries find it where they were.
        self.port = port or free_port()
        self.log_path = home.parent / f"{name}-{self.port}.log"
        self.proc: subprocess.Popen | None = None
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=30.0)

    def start(self, wait: bool = True) -> AshServer:
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [str(ASH), *(["-v"] if self.verbose else []), "serve", "--port", str(self.port)],
            env=self.env,
            cwd=self.home,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        if wait:
            self.wait_healthy()
        return self

    def wait_healthy(self, timeout: float = 30.0) -> None:
        def healthy() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"ash serve exited with {self.proc.returncode}:\n{self.output()}")
            try:
                return self.http.get("/healthz").status_code == 200
            except httpx.TransportError:
                return False

        wait_until(healthy, timeout, "ash serve to answer /healthz")

    def post_update(self, update: dict | bytes, secret: str | None = SECRET, **headers: str) -> httpx.Response:
        """POST one update to the webhook with the secret header (None sends none)."""
        content = update if isinstance(update, bytes) else json.dumps(update).encode()
        sent = {"content-type": "application/json", **headers}
        if secret is not None:
            sent["x-telegram-bot-api-secret-token"] = secret
        return self.http.post("/telegram/webhook", content=content, headers=sent)

    def output(self) -> str:
        """Everything the process wrote to stdout and stderr so far."""
        return self.log_path.read_text(encoding="utf-8", errors="replace") if self.log_path.exists() else ""

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs (a crash, an OOM kill, a pulled plug)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        """SIGTERM, as a container stop sends; SIGKILL after 15 s."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()
        self.http.close()
