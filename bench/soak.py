"""The soak, long: every fault tests/support/soak.py knows, drawn from one seed, through a real
`ash serve` and the stub Bot API and models; prints what was injected and what came of it.

    .venv/bin/python bench/soak.py --seed N --updates 20000 [--chats N] [--rate N] [--keep DIR]

Printed: updates, chats, faults injected by kind, answers, duplicates found, lost, model requests
against turns (failures and re-runs apart), /healthz p50/p99/max (and a trivial server's on the
same machine meanwhile), wall time, and every problem found, /healthz answers over 100 ms that
the machine does not explain among them (the exit status is 1 if any). Kills
and restores come about one per 1,000 updates each, group migrations one per 1,000, blocks one per
300; Telegram delivers 12 updates a second (a server that falls behind works through its backlog).
The same seed injects the same faults into the same requests; where a kill or a restore lands
depends on timing.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.support.soak import SoakPlan, run_soak  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--updates", type=int, default=20_000)
    parser.add_argument("--chats", type=int, default=None, help="default: updates / 10, at least 200")
    parser.add_argument("--rate", type=float, default=12.0, help="updates Telegram delivers per second")
    parser.add_argument("--keep", type=Path, default=None, help="run in DIR and keep it (logs, database)")
    args = parser.parse_args()
    chats = args.chats or max(200, args.updates // 10)
    every = max(1, args.updates // 1000)
    plan = SoakPlan(
        seed=args.seed,
        updates=args.updates,
        chats=chats,
        groups=max(1, chats // 10),
        rate=args.rate,
        kills=every,
        restores=every,
        migrations=min(max(1, args.updates // 1000), chats // 10),
        blocks=max(1, args.updates // 300),
        # The server may fall behind on busy cores; the backlog is part of the run, not a failure.
        deadline=3 * args.updates / args.rate + 900,
    )
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    verdict = run_soak(plan, args.keep)
    print(json.dumps(verdict.figures, indent=1))
    for problem in verdict.problems:
        print("PROBLEM", problem)
    for slow in verdict.slow_healthz:
        print("SLOW /healthz", slow)
    return 1 if verdict.problems or verdict.slow_healthz else 0


if __name__ == "__main__":
    sys.exit(main())
