"""A real web server on loopback for the web_fetch tests: pages, redirects, slow and huge answers.

It records every request's path and Host header, so a test can see which name the fetcher asked
for while it connected to 127.0.0.1. With `tls` it speaks https and records the TLS server name.
"""

from __future__ import annotations

import io
import ipaddress
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOOPBACK = [ipaddress.ip_network("127.0.0.1/32")]


@dataclass(frozen=True)
class Seen:
    path: str
    host: str


class PageServer:
    """Serves the routes a test adds; `requests` lists what it was asked, in order."""

    def __init__(self, tls: ssl.SSLContext | None = None):
        self.routes: dict[str, Callable[[BaseHTTPRequestHandler], None]] = {}
        self.requests: list[Seen] = []
        self.headers: list[dict[str, str]] = []  # each request's headers, names in lower case
        self.server_names: list[str | None] = []
        self.stop = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                server.requests.append(Seen(self.path, self.headers.get("Host", "")))
                server.headers.append({name.lower(): value for name, value in self.headers.items()})
                route = server.routes.get(self.path)
                if route is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                route(self)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.scheme = "http"
        if tls is not None:
            tls.sni_callback = lambda sock, name, ctx: self.server_names.append(name)
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
            self.scheme = "https"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"{self.scheme}://{host}:{self.port}{path}"

    def page(self, path: str, body: bytes | str, content_type: str | None = "text/html; charset=utf-8") -> None:
        data = body.encode() if isinstance(body, str) else body

        def answer(handler: BaseHTTPRequestHandler) -> None:
            handler.send_response(200)
            if content_type is not None:
                handler.send_header("Content-Type", content_type)
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)

        self.routes[path] = answer

    def encoded(
        self,
        path: str,
        body: bytes,
        encoding: str,
        content_type: str = "text/plain; charset=utf-8",
        sent: threading.Event | None = None,
    ) -> None:
        """`body` (already compressed) sent with `Content-Encoding: encoding`; `sent` is set once it
        is all written. A client that stops reading early is what a bomb meets: no error here."""

        def answer(handler: BaseHTTPRequestHandler) -> None:
            handler.send_response(200)
            handler.send_header("Content-Type", content_type)
            handler.send_header("Content-Encoding", encoding)
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            try:
                handler.wfile.write(body)
                handler.wfile.flush()
            except OSError:
                pass
            if sent is not None:
                sent.set()

        self.routes[path] = answer

    def redirect(self, path: str, location: str, status: int = 302) -> None:
        def answer(handler: BaseHTTPRequestHandler) -> None:
            handler.send_response(status)
            handler.send_header("Location", location)
            handler.send_header("Content-Length", "0")
            handler.end_headers()

        self.routes[path] = answer

    def endless(self, path: str, content_type: str = "text/plain", delay: float = 0.0) -> None:
        """A body that never ends: 64 KiB chunks, `delay` seconds apart, until the test is over."""

        def answer(handler: BaseHTTPRequestHandler) -> None:
            handler.send_response(200)
            handler.send_header("Content-Type", content_type)
            handler.end_headers()
            chunk = b"all work and no play makes jack a dull boy\n" * 1524
            try:
                while not self.stop.is_set():
                    handler.wfile.write(chunk)
                    handler.wfile.flush()
                    time.sleep(delay)
            except OSError:
                pass  # the fetcher hung up: what a cap is for

        self.routes[path] = answer

    def drip(self, path: str, every: float = 0.1) -> None:
        """A page that sends one byte every `every` seconds, so no single read ever times out."""

        def answer(handler: BaseHTTPRequestHandler) -> None:
            handler.send_response(200)
            handler.send_header("Content-Type", "text/plain")
            handler.end_headers()
            try:
                while not self.stop.wait(every):
                    handler.wfile.write(b".")
                    handler.wfile.flush()
            except OSError:
                pass

        self.routes[path] = answer

    def close(self) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def pdf_with_text(*lines: str) -> bytes:
    """A one-page PDF whose text layer holds `lines` (Helvetica), written by hand: a real file
    with a cross-reference table, which pypdf reads like any other."""
    shown = " ".join(f"({line}) Tj 0 -20 Td" for line in lines)
    stream = f"BT /F1 14 Tf 72 720 Td {shown} ET".encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 4 0 R >> >> "
        b"/Contents 5 0 R >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
    ]
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n%s\nendobj\n" % (number, body))
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    out.writelines(b"%010d 00000 n \n" % offset for offset in offsets)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    return out.getvalue()
