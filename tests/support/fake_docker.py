"""A stand-in Docker engine on a unix socket: the Engine API's version and image-inspect endpoints,
enough for the docker SDK to connect and look an image up. It counts what it was asked, so a
test can see whether Ash asked the engine at all.

For the "an engine answers" cases that need no real engine; the sandbox's own behaviour is
tested against a real one (tests/sandbox/test_sandbox_docker.py).
"""

from __future__ import annotations

import json
import socketserver
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path

# GET /version's fields as the Engine API reference names them; the SDK reads ApiVersion.
VERSION = {"ApiVersion": "1.45", "MinAPIVersion": "1.24", "Version": "26.1.5", "Os": "linux", "Arch": "amd64"}


class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class FakeDockerEngine:
    """Serves /version and /images/NAME/json; `images` are the names it has."""

    def __init__(self, socket_path: Path, images: set[str] | None = None):
        self.socket_path = socket_path
        self.images = images if images is not None else set()
        self.requests: list[str] = []
        self.lock = threading.Lock()
        self.server = _UnixHTTPServer(str(socket_path), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def host(self) -> str:
        """The DOCKER_HOST value that reaches this engine."""
        return f"unix://{self.socket_path}"

    def __enter__(self) -> FakeDockerEngine:
        self.thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.socket_path.unlink(missing_ok=True)

    def asked(self, fragment: str) -> int:
        """How many requests had `fragment` in their path."""
        with self.lock:
            return sum(fragment in path for path in self.requests)

    def _handler(self):
        engine = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                return

            def address_string(self) -> str:  # a unix socket has no client address
                return "unix"

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                with engine.lock:
                    engine.requests.append(path)
                if path.endswith("/version"):
                    self._json(200, VERSION)
                elif path.startswith("/v") and "/images/" in path and path.endswith("/json"):
                    name = path.split("/images/", 1)[1].removesuffix("/json")
                    if name in engine.images:
                        self._json(200, {"Id": "sha256:" + "0" * 64, "RepoTags": [name]})
                    else:
                        self._json(404, {"message": f"No such image: {name}"})
                else:
                    self._json(404, {"message": "page not found"})

            def _json(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler
