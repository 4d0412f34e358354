"""Every benchmark in one run, then one markdown table: figure, goal, result.

    .venv/bin/python bench/run_all.py [--quick]

Runs bench/coldstart.py (Ash and the seed's stack alternating), bench/webhook_load.py,
bench/turn_overhead.py, bench/rss.py and bench/locomo.py as subprocesses and reads their
output. --quick shortens everything (fewer runs, shorter loads, 1k/10k only, 200 turns).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PY = str(REPO / ".venv" / "bin" / "python")
sys.path.insert(0, str(REPO))


def run(*argv: str) -> str:
    """Run one bench script; its stdout (stderr passes through for progress)."""
    print(f"$ {' '.join(argv)}", file=sys.stderr, flush=True)
    started = time.perf_counter()
    done = subprocess.run([PY, *argv], cwd=REPO, stdout=subprocess.PIPE, text=True)
    print(done.stdout, file=sys.stderr)
    print(f"  ({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
    if done.returncode != 0:
        raise SystemExit(f"{argv[0]} failed with exit code {done.returncode}")
    return done.stdout


def number(pattern: str, text: str) -> float:
    found = re.search(pattern, text, re.MULTILINE)
    if found is None:
        raise SystemExit(f"no match for {pattern!r} in:\n{text}")
    return float(found.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    from bench.peers.setup_peer import ensure

    ensure()  # the peer venv first, so its install time is in no figure
    runs = "3" if args.quick else "10"
    rows: list[tuple[str, str, str]] = []

    cold = run("bench/coldstart.py", "--runs", runs, "--vs-peer")  # alternating, run for run
    ash_ms = number(r"^cold start median: (\d+) ms", cold)
    peer_ms = number(r"peer cold start median: (\d+) ms", cold)
    rows.append(("cold start, `ash serve` to first 200 (median)", "< 1000 ms", f"{ash_ms:.0f} ms"))
    rows.append(("cold start, seed's stack (median)", "-", f"{peer_ms:.0f} ms"))
    rows.append(("cold start ratio Ash / seed", "< 1/7 (0.14)", f"{ash_ms / peer_ms:.2f}"))

    load = run("bench/webhook_load.py", "--seconds", "5" if args.quick else "10")
    health = number(r"\| ash /healthz \| (\d+)", load)
    hook = number(r"\| ash webhook \| (\d+)", load)
    hook_p99 = number(r"\| ash webhook \| \d+ \| [\d.]+ \| ([\d.]+)", load)
    idle = number(r"\| ash webhook, inbox worker idle \| (\d+)", load)
    idle_p99 = number(r"\| ash webhook, inbox worker idle \| \d+ \| [\d.]+ \| ([\d.]+)", load)
    seed = number(r"\| peer webhook \| (\d+)", load)
    rows.append(("webhook acks/s, 32 connections (inbox worker running)", "-", f"{hook:.0f}/s"))
    ratio = number(r"webhook/healthz ratio: ([\d.]+)", load)
    per_round = re.search(r"webhook/healthz ratio: [\d.]+ \(rounds: ([^)]*)\)", load).group(1)
    rows.append(
        ("webhook / own /healthz rate (median of rounds)", ">= 0.4", f"{ratio:.2f} ({per_round}; {health:.0f}/s)")
    )
    rows.append(("webhook rate Ash / seed's stack", ">= 10x", f"{hook / seed:.1f}x ({hook:.0f} / {seed:.0f})"))
    rows.append(("webhook p99 at 32 connections", "< 50 ms", f"{hook_p99:.1f} ms"))
    rows.append(("webhook acks/s, inbox worker idle (no bot token)", "-", f"{idle:.0f}/s, p99 {idle_p99:.1f} ms"))

    sizes = "1000,10000" if args.quick else "1000,10000,100000"
    turns = run("bench/turn_overhead.py", "--sizes", sizes)
    pattern = r"\| (\d+) \| ([\d.]+) / [\d.]+ \| ([\d.]+) / [\d.]+ \| ([\d.]+) / [\d.]+ \|"
    for size, before, after, received in re.findall(pattern, turns):
        goal = "p50 <= 30 ms (sum)" if size == "100000" else "-"
        total = float(received) + float(after)
        rows.append(
            (
                f"turn overhead p50 at {int(size):,} messages (received->model + answer->stored)",
                goal,
                f"{received} + {after} = {total:.1f} ms (turn start->model {before})",
            )
        )

    rss = run("bench/rss.py", "--turns", "200" if args.quick else "1000")
    end = number(r"after \d+ turns (\d+) MB", rss)
    turns_done = int(number(r"turns: (\d+)", rss))
    rows.append((f"worker RSS after {turns_done} turns", "report", f"{end:.0f} MB"))

    locomo = run("bench/locomo.py")
    recall = number(r"hybrid recall@10 overall: ([\d.]+)", locomo)
    rows.append(("LoCoMo hybrid recall@10 (evidence turns)", "report", f"{recall:.3f}"))

    print("| figure | goal | result |")
    print("|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
