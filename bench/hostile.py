"""What a hostile page, file or client costs everyone else: worker memory, /healthz, a bystander.

    .venv/bin/python bench/hostile.py [--only NAME ...] [--cap SECONDS] [--source PATH]

For each attack a fresh `ash serve` starts against a loopback stub of the Bot API and Anthropic,
and the attack is made as a person would make it:

- gzip-bomb: the owner asks Ash to read a page; the model calls `web_fetch`, and the page is a
  39 KB `Content-Encoding: gzip, gzip` stream of 16 GiB of zeros;
- html-tables: the same with a 1.3 MB page of 30,000 small tables (trafilatura: ~25 s per MB);
- pdf-bomb: the owner sends a 20 KB PDF whose 100 pages draw one 2 MB content stream;
- six-pdf-bombs: the same PDF from the owner in six chats at once;
- slow-uploads: 1,100 connections post the web view's sign-in form a byte every 5 s.

A second after the attack starts, a bystander (another allowed person, in their own chat, who
said "hi" once before the attack so that the server is warm) says "hello". Printed per attack:
the worker's peak RSS (VmHWM of the granian worker, from /proc), /healthz p50, p99 and worst
while the attack lasts (asked every 10 ms), and how long the bystander waited for the answer.
An attack is followed for at most `--cap` seconds (90); anything still waiting then is printed
as "> cap". `--source` runs another checkout (a git worktree of an older commit) with this venv,
for the before/after in one run.

The pages are served from loopback, which web_fetch refuses in production; bench/hostile_site/
sitecustomize.py tells the fetcher to trust loopback, as the tests do. Nothing else is patched.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.support.bombs import GiB, gzipped, slow_pdf, table_page, zeros  # noqa: E402
from tests.support.faults import (  # noqa: E402
    OWNER,
    AshServer,
    anthropic_sse,
    anthropic_tool_use,
    private_text,
    server_env,
    write_config,
)
from tests.support.telegram import load  # noqa: E402
from tests.support.web_pages import PageServer  # noqa: E402

SITE = Path(__file__).resolve().parent / "hostile_site"
BYSTANDER = 777000111
POLL = 0.010
SLOW_CONNECTIONS = 1100
SIX = [OWNER, 555000001, 555000002, 555000003, 555000004, 555000005]


class Stub:
    """The Bot API (messages, getFile and downloads) and Anthropic on loopback, for this bench.

    The model calls `web_fetch` when a message holds a URL, and answers "Read it." once a tool's
    result came back; anything else is answered "Hello there!"."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.files: dict[str, bytes] = {}
        self.sent: list[tuple[float, str, str]] = []  # (when, chat id, text) of every send and edit
        self.next_id = 9000
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                return

            def _reply(self, status: int, payload: dict | bytes, kind: str = "application/json") -> None:
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                with contextlib.suppress(OSError):
                    self.wfile.write(data)

            def do_GET(self) -> None:
                name = self.path.rsplit("/", 1)[-1]
                data = stub.files.get(name)
                if data is None:
                    self._reply(404, {"ok": False})
                    return
                self._reply(200, data, "application/octet-stream")

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                if self.path.endswith("/messages"):
                    self._reply(200, stub.model(body), "text/event-stream")
                    return
                self._reply(200, stub.telegram(self.path.rsplit("/", 1)[-1], body))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def model(self, body: dict) -> bytes:
        last = body["messages"][-1]
        blocks = last["content"] if isinstance(last["content"], list) else [{"type": "text", "text": last["content"]}]
        if any(block.get("type") == "tool_result" for block in blocks):
            return b"".join(anthropic_sse("Read it."))
        text = " ".join(block.get("text", "") for block in blocks if block.get("type") == "text")
        url = next((word for word in text.split() if word.startswith("http://")), None)
        if url is not None:
            return anthropic_tool_use("web_fetch", {"url": url})
        return b"".join(anthropic_sse("Hello there!"))

    def telegram(self, method: str, body: dict) -> dict:
        with self.lock:
            if method == "getMe":
                return load("getMe_ok.json")
            if method == "getFile":
                answer = copy.deepcopy(load("getFile_ok.json"))
                name = body["file_id"]
                answer["result"].update(file_id=name, file_size=len(self.files[name]), file_path=f"documents/{name}")
                return answer
            if method in ("sendMessage", "editMessageText"):
                self.sent.append((time.perf_counter(), str(body["chat_id"]), body["text"]))
                if method == "sendMessage":
                    self.next_id += 1
                    sent = copy.deepcopy(load("sendMessage_ok.json"))
                    sent["result"].update(message_id=self.next_id, text=body["text"])
                    sent["result"]["chat"]["id"] = body["chat_id"]
                    return sent
                return load("editMessageText_ok.json")
        return {"ok": True, "result": True}

    def answered(self, chat: int, since: float) -> float | None:
        """When `chat` was first shown a final answer after `since` (not a streaming cursor)."""
        with self.lock:
            for when, chat_id, text in self.sent:
                if chat_id == str(chat) and when >= since and not text.endswith("…"):
                    return when
        return None


class Watch:
    """Asks /healthz every POLL seconds, and samples the worker's peak RSS, each on a thread."""

    def __init__(self, server: AshServer):
        self.server = server
        self.samples: list[float] = []
        self.asking: float | None = None  # when the probe in flight was sent
        self.peak_kb = 0
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=f, daemon=True) for f in (self._health, self._memory)]

    def _health(self) -> None:
        import httpx

        with httpx.Client(base_url=f"http://127.0.0.1:{self.server.port}", timeout=120.0) as http:
            while not self._stop.is_set():
                started = self.asking = time.perf_counter()
                with contextlib.suppress(Exception):  # a refused or dropped probe counts as slow
                    http.get("/healthz")
                self.asking = None
                self.samples.append(time.perf_counter() - started)
                time.sleep(POLL)

    def _memory(self) -> None:
        # Apart from the probes: a stalled server answers none, and its memory is what grows then.
        while not self._stop.is_set():
            self.peak_kb = max(self.peak_kb, worker_peak_kb(self.server.proc.pid))
            time.sleep(0.05)

    def __enter__(self) -> Watch:
        for thread in self._threads:
            thread.start()
        return self

    def unanswered(self) -> list[float]:
        """The probe still waiting, as a sample of how long it has waited so far (a stalled
        server answers no probe at all: without this it would look quiet)."""
        asking = self.asking
        return [] if asking is None else [time.perf_counter() - asking]

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=1)


def worker_peak_kb(supervisor: int) -> int:
    """The largest VmHWM among the processes under `ash serve` (the granian worker)."""
    peak = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
        if fields.get("PPid", "").strip() == str(supervisor) and "VmHWM" in fields:
            peak = max(peak, int(fields["VmHWM"].split()[0]))
    return peak


def document_update(update_id: int, chat: int, name: str) -> dict:
    """The recorded document update, from `chat`'s person, carrying the stub's file `name`."""
    update = copy.deepcopy(load("update_document_docs_example.json"))
    update["update_id"] = update_id
    message = update["message"]
    message["message_id"] = update_id
    message["from"].update(id=chat, is_bot=False)
    message["chat"] = {"id": chat, "type": "private", "first_name": "Owner"}
    message["document"].update(
        file_id=name, file_unique_id=f"u-{name}", file_name=name, mime_type="application/pdf", file_size=20_000
    )
    message["caption"] = "what does this say?"
    return update


def trickle(port: int, stop: threading.Event) -> None:
    """SLOW_CONNECTIONS connections posting the sign-in form a byte every 5 s, re-opened when cut."""
    head = (
        b"POST /admin/ui/signin HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-www-form-urlencoded\r\n"
        b"Content-Length: 100000\r\n\r\n"
    )
    sockets: list[socket.socket] = []

    def fresh() -> socket.socket | None:
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            sock.sendall(head + b"t")
            sock.setblocking(False)
            return sock
        except OSError:
            return None

    sockets = [s for s in (fresh() for _ in range(SLOW_CONNECTIONS)) if s is not None]
    while not stop.wait(5.0):
        for index, sock in enumerate(sockets):
            try:
                sock.send(b"o")
            except OSError:
                sock.close()
                sockets[index] = fresh() or sock
    for sock in sockets:
        sock.close()


def run(attack: str, cap: float, source: Path | None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        stub, pages = Stub(), PageServer()
        home = Path(tmp) / "home"
        write_config(home, allowed=[BYSTANDER, *SIX[1:]], extra='\n[sandbox]\napproval = "never"\n')
        env = server_env(home, None, TELEGRAM_API_BASE=stub.origin, ANTHROPIC_BASE_URL=stub.origin)
        env["PYTHONPATH"] = os.pathsep.join([*([str(source)] if source else []), str(SITE)])
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        server = AshServer(home, env, name=attack).start()
        stop = threading.Event()
        try:
            # A first exchange, so that what follows measures the attack, not the first turn's imports.
            warmed = time.perf_counter()
            assert server.post_update(private_text(90_000, "hi", BYSTANDER)).status_code == 200
            wait_for(lambda: stub.answered(BYSTANDER, warmed), warmed + 120)
            with Watch(server) as watch:
                time.sleep(1.0)
                quiet = list(watch.samples)
                started = time.perf_counter()
                targets = start_attack(attack, server, stub, pages, stop)
                time.sleep(1.0)
                asked = time.perf_counter()
                if delivered(server, private_text(90_001, "hello", BYSTANDER)):
                    bystander = wait_for(lambda: stub.answered(BYSTANDER, asked), asked + cap)
                else:
                    bystander = None  # the webhook itself did not answer: the service was down
                done = [wait_for(lambda chat=chat: stub.answered(chat, started), started + cap) for chat in targets]
                stop.set()
                during = watch.samples[len(quiet) :] + watch.unanswered()
            return {
                "attack": attack,
                "peak_mb": watch.peak_kb / 1024,
                "p50": statistics.median(during) * 1000,
                "p99": sorted(during)[int(0.99 * (len(during) - 1))] * 1000,
                "worst": max(during) * 1000,
                "bystander": None if bystander is None else bystander - asked,
                "attack_done": None if None in done or not done else max(done) - started,
            }
        finally:
            stop.set()
            server.stop()
            stub.close()
            pages.httpd.shutdown()


def start_attack(attack: str, server: AshServer, stub: Stub, pages: PageServer, stop: threading.Event) -> list[int]:
    """Start one attack; returns the chats whose answer ends it (none for slow uploads)."""
    if attack == "gzip-bomb":
        pages.encoded("/bomb", gzipped(zeros(16 * GiB)), "gzip, gzip")
        url = pages.url("/bomb")
    elif attack == "html-tables":
        pages.page("/tables", table_page())
        url = pages.url("/tables")
    elif attack in ("pdf-bomb", "six-pdf-bombs"):
        chats = SIX if attack == "six-pdf-bombs" else [OWNER]
        for number, chat in enumerate(chats):
            stub.files[f"bomb{number}.pdf"] = slow_pdf()
            assert server.post_update(document_update(100 + number, chat, f"bomb{number}.pdf")).status_code == 200
        return chats
    else:
        threading.Thread(target=trickle, args=(server.port, stop), daemon=True).start()
        return []
    delivered(server, private_text(100, f"please read {url}", OWNER))
    return [OWNER]


def delivered(server: AshServer, update: dict) -> bool:
    """Whether the webhook took the update (within the client's 30 s), as Telegram would see it."""
    try:
        return server.post_update(update).status_code == 200
    except Exception:
        return False


def wait_for(check, deadline: float) -> float | None:
    while time.perf_counter() < deadline:
        found = check()
        if found is not None:
            return found
        time.sleep(0.05)
    return None


def seconds(value: float | None, cap: float) -> str:
    return f"> {cap:.0f} s" if value is None else f"{value:.1f} s"


ATTACKS = ("gzip-bomb", "html-tables", "pdf-bomb", "six-pdf-bombs", "slow-uploads")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=ATTACKS, default=list(ATTACKS))
    parser.add_argument("--cap", type=float, default=90.0, help="seconds an attack is followed at most")
    parser.add_argument("--source", type=Path, help="another checkout of Ash to run with this venv")
    args = parser.parse_args()
    print(
        "| attack | worker peak RSS | /healthz p50 / p99 / worst | bystander's answer after | attack answered after |"
    )
    print("|---|---|---|---|---|")
    for attack in args.only:
        result = run(attack, args.cap, args.source)
        print(
            f"| {attack} | {result['peak_mb']:.0f} MB | {result['p50']:.0f} / {result['p99']:.0f} / "
            f"{result['worst']:.0f} ms | {seconds(result['bystander'], args.cap)} | "
            f"{seconds(result['attack_done'], args.cap) if attack != 'slow-uploads' else '-'} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
