"""Attack: a page that is small on the wire and enormous once decompressed, for `web_fetch`.

A 3,477-byte page sent as `Content-Encoding: gzip, gzip` took the worker from 68 MiB to 4,218 MiB
and blocked the event loop for 20 s: httpx inflated every chunk whole before the 3 MB limit was
applied. Now lib/senses/inflate.py decodes the raw bytes in bounded steps (lib/senses/web.py).

Each fetch runs the real WebFetcher against a real server on loopback, in a fresh child process
whose peak RSS is read at the end: the bombs below inflate to 4 and 16 GiB, the child stays near
its start-up size. The peak is VmHWM (/proc/self/status), the high-water mark of the child's own
memory since it started: ru_maxrss would do, but Linux carries the parent's peak into it across
fork and exec, and the parent here is a pytest process that may have grown to 600 MB. The child
also caps its own address space at 2 GiB, so a regression fails the test with a MemoryError
instead of taking this machine's memory.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import zlib

import pytest

from lib.config import WebFetchConfig
from lib.senses.inflate import STEP
from lib.senses.web import WebFetcher
from tests.support.bombs import GiB, MiB, gzipped, zeros
from tests.support.paths import REPO
from tests.support.web_pages import LOOPBACK, PageServer

MAX_BYTES = 3_000_000  # [web_fetch] max_bytes, the default
NOTE = "[The page is larger than 3,000,000 bytes; only its beginning was read.]"
# Far below what any of the bombs needs (4 GiB and more), far above the ~75 MB the child peaks at.
PEAK_RSS_LIMIT = 300 * MiB
# What a bomb's fetch may add to the child's peak after a first small fetch: the 3 MB page, a few
# copies of its text and the allocator's slack come to about 40 MB here. httpx inflated each 64 KiB
# network chunk whole, 64 MiB at a time: the fetch grew the child by 127 MiB that way.
GROWTH_LIMIT = 96 * MiB

FETCH_IN_A_CHILD = """
import asyncio, ipaddress, json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
from lib.config import WebFetchConfig
from lib.senses.web import WebFetcher

def high_water():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024

config = WebFetchConfig(timeout=60.0, max_bytes=int(sys.argv[2]), max_chars=10_000_000)
fetcher = WebFetcher(config, trusted=[ipaddress.ip_network("127.0.0.1/32")])
asyncio.run(fetcher.fetch(sys.argv[3]))  # a small page first: what every fetch loads is loaded
start = high_water()
page = asyncio.run(fetcher.fetch(sys.argv[1]))
peak = high_water()
body, note = page.text.rsplit("\\n\\n", 1)
result = {"body": len(body), "zeros": body.count("\\0"), "note": note, "cut": page.truncated}
print(json.dumps({**result, "start": start, "peak": peak}))
"""


@pytest.fixture(scope="module")
def server():
    pages = PageServer()
    yield pages
    pages.close()


@pytest.fixture(scope="module")
def bombs(server):
    """The bombs, served once for the module: (path, what it inflates to)."""
    gzip_4g = zeros(4 * GiB)
    server.encoded("/gzip", gzip_4g, "gzip")
    server.encoded("/deflate", zeros(4 * GiB, "zlib"), "deflate")
    server.encoded("/deflate-raw", zeros(4 * GiB, "raw"), "deflate")
    # 16 GiB of zeros, gzipped twice: 39 KB on the wire.
    stacked = gzipped(zeros(16 * GiB))
    assert len(stacked) < 40_000
    server.encoded("/stacked", stacked, "gzip, gzip")
    server.redirect("/innocent-link", "/stacked")
    server.encoded("/small", gzipped(b"a small page\n"), "gzip")
    return server


def fetch_in_a_child(url: str, small: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", FETCH_IN_A_CHILD, url, str(MAX_BYTES), small],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_the_bombs_are_real_streams_of_zeros():
    # The same construction at sizes small enough to inflate here, trailer (CRC, length) checked.
    for size in (3 * MiB, 37 * MiB):
        assert zlib.decompress(zeros(size), 16 + zlib.MAX_WBITS) == bytes(size)
        assert zlib.decompress(zeros(size, "zlib")) == bytes(size)
        assert zlib.decompress(zeros(size, "raw"), -zlib.MAX_WBITS) == bytes(size)
    assert zlib.decompress(zlib.decompress(gzipped(zeros(5 * MiB)), 31), 31) == bytes(5 * MiB)


@pytest.mark.parametrize("path", ["/gzip", "/deflate", "/deflate-raw", "/stacked", "/innocent-link"])
def test_a_decompression_bomb_comes_back_cut_at_max_bytes_in_bounded_memory(bombs, path):
    result = fetch_in_a_child(bombs.url(path), bombs.url("/small"))
    assert result["body"] == result["zeros"] == MAX_BYTES
    assert (result["note"], result["cut"]) == (NOTE, True)
    assert result["peak"] < PEAK_RSS_LIMIT, f"peak RSS {result['peak'] / MiB:.0f} MiB"
    growth = result["peak"] - result["start"]
    assert growth < GROWTH_LIMIT, f"the fetch grew the process by {growth / MiB:.0f} MiB"


async def test_the_event_loop_keeps_turning_while_a_bomb_is_decoded():
    """A server in this event loop sends a 256 MiB bomb (gzip, gzip) in one write; from then on
    only the fetcher's decoding keeps the loop busy. A task that counts its turns of the loop gets
    one at least every STEP bytes of the page: before, httpx inflated the whole write in one call,
    and the counter saw a handful of turns (the 20 s freeze of the report)."""
    bomb = gzipped(zeros(256 * MiB))
    sent = asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        head = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Encoding: gzip, gzip\r\n"
        writer.write(f"{head}Content-Length: {len(bomb)}\r\n\r\n".encode() + bomb)
        sent.set()
        await writer.drain()
        await reader.read()  # until the fetcher hangs up
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    turns = 0

    async def count_turns() -> None:
        nonlocal turns
        await sent.wait()
        while True:
            turns += 1
            await asyncio.sleep(0)

    counter = asyncio.create_task(count_turns())
    try:
        fetcher = WebFetcher(WebFetchConfig(timeout=30.0, max_chars=10_000_000), trusted=LOOPBACK)
        page = await fetcher.fetch(f"http://127.0.0.1:{port}/bomb")
    finally:
        counter.cancel()
        server.close()
    assert page.truncated and page.text.endswith(NOTE)
    assert turns >= MAX_BYTES // STEP  # 45: one per step of the last layer, at the least
