"""Cold start: from launching `ash serve` to the first 200 from /healthz.

Usage: .venv/bin/python bench/coldstart.py [--runs 10] [--cmd "..."] [--vs-peer]
Each run uses a fresh ASH_HOME (so migrations run too) and a free port; prints each run and
the median. `--cmd` times another server command instead (it must honour {port}). `--vs-peer`
alternates Ash and the seed's stack (bench/peers/), run for run, so that a noisy spell on the
machine slows both alike, and prints the ratio of the medians.

Ash's own modules are byte-compiled first, as the container image does at build time (with
PYTHONDONTWRITEBYTECODE set, as on some machines, every start would compile them again).
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ASH = REPO / ".venv" / "bin" / "ash"
sys.path.insert(0, str(REPO))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(port: int, started: float, proc: subprocess.Popen, path: str = "/healthz") -> float:
    """Seconds from `started` to the first 200 (polling every 5 ms, 20 s at most)."""
    url = f"http://127.0.0.1:{port}{path}"
    while time.perf_counter() - started < 20:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return time.perf_counter() - started
        except OSError:
            time.sleep(0.005)
    raise TimeoutError("no 200 within 20 s")


def one_run(command: str | None, path: str) -> float:
    port = free_port()
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "ASH_HOME": home, "PORT": str(port)}
        argv = shlex.split(command.format(port=port)) if command else [str(ASH), "serve", "--port", str(port)]
        started = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=home)
        try:
            return wait_healthy(port, started, proc, path)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


def compile_ash() -> None:
    """Byte-compile Ash's modules, as the Containerfile does."""
    sources = ["lib", "handlers", "app.py", "migrate.py"]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *sources], cwd=REPO, check=True)


def measure(runs: int, command: str | None = None, path: str = "/healthz") -> list[float]:
    """Cold-start seconds for `runs` fresh starts."""
    return [one_run(command, path) for _ in range(runs)]


def peer_command() -> str:
    from bench.peers.setup_peer import ensure

    return f"{ensure()} {REPO / 'bench' / 'peers' / 'seed_webhook.py'} --port {{port}}"


def summary(label: str, times: list[float]) -> float:
    median, low, high = (x * 1000 for x in (statistics.median(times), min(times), max(times)))
    print(f"{label} median: {median:.0f} ms (min {low:.0f}, max {high:.0f})")
    return median


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--cmd", default=None, help="another server command, with {port}")
    parser.add_argument("--path", default="/healthz")
    parser.add_argument("--vs-peer", action="store_true", help="alternate with the seed's stack; print the ratio")
    args = parser.parse_args()
    compile_ash()
    if args.vs_peer:
        peer = peer_command()
        ash_times, peer_times = [], []
        for i in range(1, args.runs + 1):
            ash_times.append(one_run(None, args.path))
            peer_times.append(one_run(peer, args.path))
            print(f"run {i}: ash {ash_times[-1] * 1000:.0f} ms, peer {peer_times[-1] * 1000:.0f} ms")
        ash = summary("cold start", ash_times)
        seed = summary("peer cold start", peer_times)
        print(f"ratio ash / peer: {ash / seed:.3f} (1/{seed / ash:.1f})")
        return 0
    times = measure(args.runs, args.cmd, args.path)
    for i, t in enumerate(times, 1):
        print(f"run {i}: {t * 1000:.0f} ms")
    summary("cold start", times)
    return 0


if __name__ == "__main__":
    sys.exit(main())
