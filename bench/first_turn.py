"""The first turn after a start: how long /healthz waits while it runs, and how long from the
message to the model's first request.

    .venv/bin/python bench/first_turn.py [--runs 5] [--after SECONDS] [--source PATH]

Each run starts `ash serve` on a fresh home against a loopback stub of the Bot API and Anthropic
(tests/support/faults.py), and as soon as /healthz answers posts one update (Fly's auto-stop
makes every first turn after idle a first turn after a start), or `--after` seconds later (a
message that comes once the server has settled). /healthz is asked every 10 ms
throughout. Printed per run and as medians: /healthz p99 and worst while the first turn runs
(from the webhook to the answer), /healthz p99 once the server is quiet (3 s after the answer),
and seconds from the webhook to the first model request. `--source` runs another checkout of
Ash (e.g. a `git worktree` of an older commit) with this venv, for a before/after in one run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.support.faults import AshServer, Upstream, private_text, server_env, wait_until, write_config  # noqa: E402

POLL = 0.010
QUIET = 3.0


class Poller:
    """Asks /healthz every POLL seconds on a thread; records (sent at, seconds to answer)."""

    def __init__(self, server: AshServer):
        self.server = server
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import httpx

        with httpx.Client(base_url=f"http://127.0.0.1:{self.server.port}", timeout=60.0) as http:
            while not self._stop.is_set():
                sent = time.perf_counter()
                http.get("/healthz")
                self.samples.append((sent, time.perf_counter() - sent))
                time.sleep(POLL)

    def __enter__(self) -> Poller:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join()

    def between(self, start: float, end: float) -> list[float]:
        """Answer times of the requests in flight at any moment from `start` to `end`."""
        return [took for sent, took in self.samples if sent <= end and sent + took >= start]


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


def one_run(source: Path | None, after: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp, Upstream() as upstream:
        home = Path(tmp) / "home"
        write_config(home)
        env = server_env(home, upstream)
        if source is not None:
            env["PYTHONPATH"] = str(source)  # ahead of this venv's editable install
        server = AshServer(home, env).start()
        try:
            time.sleep(after)
            with Poller(server) as poller:
                posted = time.perf_counter()
                assert server.post_update(private_text(1, "hello there")).status_code == 200
                wait_until(lambda: upstream.count("anthropic") >= 1, 120, "the first model request")
                asked = time.perf_counter()
                wait_until(lambda: upstream.texts_to(private_text(1, "")["message"]["chat"]["id"]), 120, "the answer")
                answered = time.perf_counter()
                time.sleep(QUIET)
                quiet_end = time.perf_counter()
            during = poller.between(posted, answered)
            quiet = poller.between(answered + 0.5, quiet_end)
            return {
                "to_model_s": asked - posted,
                "during_p99_ms": p99(during) * 1000,
                "during_max_ms": max(during) * 1000,
                "quiet_p99_ms": p99(quiet) * 1000,
            }
        finally:
            server.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--after", type=float, default=0.0, help="seconds between /healthz's first 200 and the message")
    parser.add_argument("--source", type=Path, help="another checkout of Ash to run with this venv")
    args = parser.parse_args()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # the image ships byte-compiled modules
    results = []
    for number in range(1, args.runs + 1):
        result = one_run(args.source, args.after)
        results.append(result)
        print(
            f"run {number}: message to model request {result['to_model_s']:.2f} s; /healthz during the first turn "
            f"p99 {result['during_p99_ms']:.0f} ms (worst {result['during_max_ms']:.0f} ms); "
            f"quiet p99 {result['quiet_p99_ms']:.0f} ms",
            flush=True,
        )
    for key, label in (
        ("to_model_s", "message to first model request (s)"),
        ("during_p99_ms", "/healthz p99 during the first turn (ms)"),
        ("during_max_ms", "/healthz worst during the first turn (ms)"),
        ("quiet_p99_ms", "/healthz p99 when quiet (ms)"),
    ):
        print(f"median {label}: {statistics.median(r[key] for r in results):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
