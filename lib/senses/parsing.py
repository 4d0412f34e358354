"""Parsing a stranger's file in a process Ash can kill: a PDF's text, an HTML page's article.

A 20 KB PDF took pypdf 17 minutes, and trafilatura needs about 25 s per MB of small tables;
run in threads of the default executor, six such files held all of its threads and everyone's
database hops queued behind them. No parser can be stopped from outside a thread, so each parse
is a fresh `python -m lib.senses.parser_process`, and its limits are enforced from outside it:

- a wall-clock deadline, counted from the call (waiting for a slot included): when it passes,
  or when the caller is cancelled (/stop, shutdown), the process is killed (SIGKILL) and reaped;
- before reading its job the process limits itself (lib/senses/parser_process.py): MEMORY_BYTES
  of address space, CPU seconds a little past the deadline (a backstop should Ash fail to kill
  it), no core file, first choice of the kernel's OOM killer, and death with Ash;
- it stops extracting at the caller's character cap, and Ash reads at most a bounded number of
  bytes of its answer (and of its stderr);
- at most SLOTS run at once; the others wait for a slot in the event loop, holding no thread,
  and the process itself is awaited through asyncio's child watcher, not a thread of the pool;
- its environment holds no secret: no token or key is there for a parser bug to read.

A fresh interpreter costs its start-up on every parse: measured here (2 busy cores), about 0.3 s
for a small PDF (importing pypdf is most of it) and about 1 s for an HTML page (importing
trafilatura, 0.45 s, then its first extraction). That is paid once per document or fetched page,
beside a model call of seconds; in exchange a killed parse leaves nothing behind that a later
one could trip on, and nothing stays resident between parses (a pre-imported fork server would
keep ~55 MB).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import signal
import sys
import weakref
from dataclasses import dataclass

import msgspec

from lib.config import REPO_ROOT
from lib.senses.parser_process import MEMORY_EXIT, Answer, Job
from lib.senses.pdf import PdfText, UnreadableDocument

log = logging.getLogger("ash.senses")

# Parses at once in this process: two keep six hostile files from taking all memory of a 512 MB
# machine (two at most MEMORY_BYTES each), and leave a core for everything else.
SLOTS = 2
# Address space of one parse: twice what the largest legitimate input seen here needed (a 3 MB
# HTML page: 123 MB; a 10 MB PDF of text: 95 MB; the interpreter with trafilatura: 48 MB).
MEMORY_BYTES = 256 * 1024 * 1024
# CPU seconds past the deadline before the kernel ends a parse Ash failed to kill.
CPU_MARGIN = 2
# Bytes of a parse's stderr kept for the log (its end: where a traceback says what happened).
STDERR_KEPT = 4096
# Environment variables a parse inherits: what Python needs to start, nothing secret.
ENVIRONMENT = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "PYTHONPATH", "TMPDIR")

__all__ = ["MEMORY_BYTES", "HtmlText", "ParseFailed", "ParseTimeout", "ParseTooLarge", "parse_html", "parse_pdf"]


class ParseFailed(Exception):
    """The parser process ended without an answer (it crashed, or said more than it may)."""


class ParseTimeout(ParseFailed):
    """The parse passed its deadline and was killed; `started` is False when it never got a slot."""

    def __init__(self, seconds: float, *, started: bool):
        super().__init__(f"no answer within {seconds:g} s" + ("" if started else " (waiting for a free slot)"))
        self.seconds = seconds
        self.started = started


class ParseTooLarge(ParseFailed):
    """The parse needed more memory than MEMORY_BYTES."""


@dataclass(frozen=True)
class HtmlText:
    """An HTML page's title and article, read by the parser process."""

    title: str
    text: str  # at most max_chars + 1 characters: one more than will be shown says it was cut
    chars: int  # characters in the whole article


async def parse_pdf(data: bytes, *, max_pages: int, max_chars: int, timeout: float) -> PdfText:
    """A PDF's text (lib/senses/pdf.py read_pdf), read in a parser process within `timeout` s."""
    answer = await parse(Job("pdf", max_chars=max_chars, max_pages=max_pages), data, timeout=timeout)
    text = "\n\n".join(text for _, text in answer.sections)
    return PdfText(text, answer.pages, answer.pages_read, tuple(answer.sections), answer.cut)


async def parse_html(data: bytes, *, url: str, charset: str | None, max_chars: int, timeout: float) -> HtmlText:
    """An HTML page's title and article (lib/senses/article.py), read in a parser process."""
    answer = await parse(Job("html", max_chars=max_chars, url=url, charset=charset), data, timeout=timeout)
    text = answer.sections[0][1] if answer.sections else ""
    return HtmlText(answer.title, text, answer.chars)


_slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = weakref.WeakKeyDictionary()


def _slot() -> asyncio.Semaphore:
    # One semaphore per event loop (a server has one; tests make one per test): a semaphore
    # belongs to the loop it first waited in.
    loop = asyncio.get_running_loop()
    if loop not in _slots:
        _slots[loop] = asyncio.Semaphore(SLOTS)
    return _slots[loop]


async def parse(job: Job, data: bytes, *, timeout: float) -> Answer:
    """What the parser process reads in `data` within `timeout` seconds from now.

    Raises UnreadableDocument (the file has nothing to read; the reason is for the person),
    ParseTimeout, ParseTooLarge or ParseFailed."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    started = False
    try:
        async with asyncio.timeout_at(deadline), _slot():
            started = True
            answer = await _run(job, data, cpu_seconds=math.ceil(deadline - loop.time()) + CPU_MARGIN)
    except TimeoutError:
        raise ParseTimeout(timeout, started=started) from None
    if answer.unreadable is not None:
        raise UnreadableDocument(answer.unreadable)
    return answer


async def _run(job: Job, data: bytes, *, cpu_seconds: int) -> Answer:
    """One parser process, from start to reaped; killed if this is cancelled before it ends."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "lib.senses.parser_process",
        str(cpu_seconds),
        str(MEMORY_BYTES),
        str(os.getpid()),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=REPO_ROOT,
        env={name: os.environ[name] for name in ENVIRONMENT if name in os.environ},
    )
    feeding = asyncio.create_task(_feed(process.stdin, msgspec.json.encode(job) + b"\n" + data))
    errors = asyncio.create_task(_tail(process.stderr))
    try:
        out = await _read_at_most(process.stdout, _answer_limit(job))
        if out is None:
            process.kill()
        err = await errors
        code = await process.wait()
    finally:
        feeding.cancel()
        errors.cancel()
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
    if out is None:
        raise ParseFailed("it said more than it may")
    if code == 0:
        try:
            return msgspec.json.decode(out, type=Answer)
        except msgspec.DecodeError as exc:
            log.error("the parser's answer was not understood: %s", exc)
            raise ParseFailed("its answer was not understood") from None
    if code in (MEMORY_EXIT, -signal.SIGKILL):  # out of its address space, or chosen by the OOM killer
        raise ParseTooLarge(f"more memory than {MEMORY_BYTES // 2**20} MB")
    if code == -signal.SIGXCPU:
        raise ParseTimeout(cpu_seconds - CPU_MARGIN, started=True)
    log.warning("a parse ended with status %s: %s", code, err.decode(errors="replace").strip())
    raise ParseFailed(f"the parser ended with status {code}")


def _answer_limit(job: Job) -> int:
    # JSON writes a character in at most 6 bytes (\u001f); the rest is a title and numbers.
    return 6 * (job.max_chars + 1) + 64 * 1024


async def _feed(stdin: asyncio.StreamWriter | None, payload: bytes) -> None:
    assert stdin is not None
    # A parse that dies early (its limits) closes the pipe: what it did not read does not matter.
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        stdin.write(payload)
        await stdin.drain()
        stdin.close()


async def _read_at_most(stream: asyncio.StreamReader | None, limit: int) -> bytes | None:
    """Everything until EOF, or None (and the process killed by the caller) past `limit` bytes."""
    assert stream is not None
    chunks: list[bytes] = []
    size = 0
    while chunk := await stream.read(64 * 1024):
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


async def _tail(stream: asyncio.StreamReader | None) -> bytes:
    """The last STDERR_KEPT bytes until EOF; the rest is read and dropped so the process never blocks."""
    assert stream is not None
    kept = b""
    while chunk := await stream.read(64 * 1024):
        kept = (kept + chunk)[-STDERR_KEPT:]
    return kept
