"""The parser process: reads one PDF's text or one HTML page's article, under limits set first.

lib/senses/parsing.py starts it as
`python -m lib.senses.parser_process CPU_SECONDS MEMORY_BYTES PARENT_PID` and writes the job to
its stdin: one line of JSON (`Job`), then the file's bytes. Before it reads any of that, the
process asks the kernel for its limits, so they hold whatever the parser does: CPU seconds
(RLIMIT_CPU: SIGXCPU, then SIGKILL a second later), address space (RLIMIT_AS: an allocation past
it fails, and the process exits with MEMORY_EXIT), no core file, first in line for the kernel's
OOM killer, and death with its parent (PR_SET_PDEATHSIG). It stops extracting at the job's
character cap and writes one JSON `Answer` on stdout.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import sys
from pathlib import Path
from typing import Literal

import msgspec

# The exit status of a parse that ran out of address space (os._exit: nothing left to allocate).
MEMORY_EXIT = 3
PR_SET_PDEATHSIG = 1  # linux/prctl.h
# Characters of a page title kept: a title is a line, not a place to hide a page.
TITLE_CHARS = 1000


class Job(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What to read: a PDF's pages or an HTML page's article, and how much of it."""

    kind: Literal["pdf", "html"]
    max_chars: int
    max_pages: int = 0  # PDF only
    url: str = ""  # HTML only: trafilatura resolves links and reads metadata with it
    charset: str | None = None  # HTML only: the declared charset, else detected


class Answer(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What was read. `unreadable` holds the reason, in words for the person, when nothing was."""

    unreadable: str | None = None
    title: str = ""
    # PDF: (page number from 1, its text) for each page with text. HTML: one (0, article text).
    sections: list[tuple[int, str]] = []
    pages: int = 0  # PDF: pages in the file
    pages_read: int = 0  # PDF: pages looked at
    chars: int = 0  # HTML: characters in the whole article (the text sent stops at max_chars + 1)
    cut: bool = False  # PDF: reading stopped at max_chars


def limit_self(cpu_seconds: int, memory_bytes: int, parent: int) -> None:
    """Apply the limits to this process; exit if the parent is already gone."""
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    with contextlib.suppress(OSError):
        Path("/proc/self/oom_score_adj").write_text("1000")  # raising it needs no privilege
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # Ash died before the request took effect
        os._exit(1)


def read(job: Job, data: bytes) -> Answer:
    """Read the job's file in this process."""
    from lib.senses.pdf import UnreadableDocument

    try:
        if job.kind == "pdf":
            from lib.senses.pdf import read_pdf

            pdf = read_pdf(data, max_pages=job.max_pages, max_chars=job.max_chars)
            return Answer(sections=list(pdf.by_page), pages=pdf.pages, pages_read=pdf.pages_read, cut=pdf.cut)
        from lib.senses.article import html_article

        article = html_article(data, url=job.url, charset=job.charset)
        text = article.text[: job.max_chars + 1]  # one more than shown: the reader knows it was cut
        return Answer(title=article.title[:TITLE_CHARS], sections=[(0, text)], chars=len(article.text))
    except UnreadableDocument as exc:
        return Answer(unreadable=str(exc))


def main() -> None:
    """Limit this process, read the job from stdin, answer on stdout."""
    cpu_seconds, memory_bytes, parent = (int(arg) for arg in sys.argv[1:4])
    limit_self(cpu_seconds, memory_bytes, parent)
    job = msgspec.json.decode(sys.stdin.buffer.readline(), type=Job)
    data = sys.stdin.buffer.read()
    try:
        answer = read(job, data)
    except MemoryError:
        os._exit(MEMORY_EXIT)
    sys.stdout.buffer.write(msgspec.json.encode(answer))
    sys.stdout.buffer.flush()


if __name__ == "__main__":
    main()
