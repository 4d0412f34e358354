"""`python -m tests.support.healthz_probe PORT OUT`: ask `/healthz` every INTERVAL seconds until
stdin closes, writing one line per answer to OUT: `unix_time seconds_taken status` (status 0:
no answer). A process of its own, so the test process's threads (deliveries, the stub upstream)
never hold it up: what it measures is the server's answer, not the test's scheduling.

`python -m tests.support.healthz_probe --control OUT` probes, the same way, a trivial asyncio
server in a process of its own (`--serve`): how long the machine itself takes to answer meanwhile.
"""

from __future__ import annotations

import asyncio
import http.client
import subprocess
import sys
import threading
import time

INTERVAL = 0.02


def probe(port: int, out_path: str, stop: threading.Event) -> None:
    """Poll until `stop` is set."""
    conn: http.client.HTTPConnection | None = None
    with open(out_path, "w", encoding="utf-8") as out:
        while not stop.is_set():
            started_at, started = time.time(), time.perf_counter()
            status = 0
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                conn.request("GET", "/healthz")
                response = conn.getresponse()
                response.read()
                status = response.status
            except (OSError, http.client.HTTPException):
                if conn is not None:
                    conn.close()
                conn = None
            out.write(f"{started_at:.4f} {time.perf_counter() - started:.5f} {status}\n")
            out.flush()
            stop.wait(INTERVAL)


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while await reader.readline():
        while (await reader.readline()) not in (b"\r\n", b""):
            pass
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()
    writer.close()


async def _serve() -> None:
    """The control: answers every request at once; prints its port, runs until stdin closes."""
    server = await asyncio.start_server(_answer, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


def main() -> None:
    if sys.argv[1] == "--serve":
        asyncio.run(_serve())
        return
    control = None
    if sys.argv[1] == "--control":
        serve = [sys.executable, "-m", "tests.support.healthz_probe", "--serve"]
        control = subprocess.Popen(serve, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        port = int(control.stdout.readline())
    else:
        port = int(sys.argv[1])
    stop = threading.Event()
    worker = threading.Thread(target=probe, args=(port, sys.argv[2], stop))
    worker.start()
    sys.stdin.read()  # until the parent closes our stdin (or dies)
    stop.set()
    worker.join()
    if control is not None:
        control.stdin.close()
        control.wait(10)


if __name__ == "__main__":
    main()
