"""Memory: resident set size of `ash serve` after 1,000 turns through the real pipeline.

    .venv/bin/python bench/rss.py [--turns 1000] [--chats 10]

A real `ash serve` (granian, one worker) gets the turns as webhook updates; a loopback stub
(tests/helpers_faults.Upstream) plays the Bot API and a zero-latency Anthropic. Embeddings are
the default local model. Prints the worker's VmRSS at start, after the first turn and at the end.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.support.faults import AshServer, Upstream, private_text, server_env, wait_until  # noqa: E402

CONFIG = """owner = 1000
[server]
tick_interval = 1.0
[telegram]
allowed_users = {allowed}
stream_edit_interval = 0.001  # must be above 0; as good as no pacing
[memory]
extraction_enabled = false
"""


def worker_rss_mb(server: AshServer) -> float:
    """VmRSS of granian's worker (the child of the main process), in MB."""
    children = Path(f"/proc/{server.proc.pid}/task/{server.proc.pid}/children").read_text().split()
    pids = [int(p) for p in children] or [server.proc.pid]
    total = 0
    for pid in pids:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total / 1024


def worker_breakdown(server: AshServer) -> str:
    """The worker's RSS split into anonymous memory (heaps, arenas, model weights) and file-backed
    pages (shared libraries), and its thread count: where to look next."""
    children = Path(f"/proc/{server.proc.pid}/task/{server.proc.pid}/children").read_text().split()
    pid = int(children[0]) if children else server.proc.pid
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    mb = {k: int(fields[k].split()[0]) / 1024 for k in ("RssAnon", "RssFile")}
    return f"anonymous {mb['RssAnon']:.0f} MB, file-backed {mb['RssFile']:.0f} MB, {fields['Threads'].strip()} threads"


def done(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT count(*) FROM inbox WHERE status = 'done'").fetchone()[0]
    finally:
        conn.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--chats", type=int, default=10)
    args = parser.parse_args()
    chats = [1000 + i for i in range(args.chats)]
    with tempfile.TemporaryDirectory() as tmp, Upstream() as upstream:
        home = Path(tmp) / "home"
        home.mkdir()
        (home / "config.toml").write_text(CONFIG.format(allowed=chats), encoding="utf-8")
        server = AshServer(home, server_env(home, upstream)).start()
        try:
            start = worker_rss_mb(server)
            server.post_update(private_text(1, "hello there, how are you today?", user_id=chats[0]))
            wait_until(lambda: done(home / "ash.db") >= 1, 120, "the first turn")
            first = worker_rss_mb(server)
            began = time.perf_counter()
            samples: list[tuple[int, float]] = []
            for n in range(2, args.turns + 1):
                chat = chats[n % len(chats)]
                text = f"note {n}: remember that item {n} costs {n * 3} euros and is blue"
                assert server.post_update(private_text(n, text, user_id=chat)).status_code == 200
                if n % 50 == 0:  # keep the backlog bounded, as real users would
                    wait_until(lambda n=n: done(home / "ash.db") >= n - 20, 300, "the backlog")
                if n % (args.turns // 10 or 1) == 0:
                    samples.append((n, worker_rss_mb(server)))
            wait_until(lambda: done(home / "ash.db") >= args.turns, 600, "every turn")
            elapsed = time.perf_counter() - began
            end = worker_rss_mb(server)
            split = worker_breakdown(server)
        finally:
            server.stop()
    print(f"turns: {args.turns} over {args.chats} chats in {elapsed:.0f} s")
    print("RSS along the way: " + ", ".join(f"{n}: {mb:.0f}" for n, mb in samples))
    print(f"worker RSS: start {start:.0f} MB, after first turn {first:.0f} MB, after {args.turns} turns {end:.0f} MB")
    print(f"worker memory at the end: {split}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
