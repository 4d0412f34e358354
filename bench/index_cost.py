"""What storing one turn costs: chunks, full text and the local model's vectors, per kind of turn.

    .venv/bin/python bench/index_cost.py [--turns 5] [--busy]

Three kinds: a short exchange, a 3,000-character assistant answer (Markdown), and a 100 KB paste
by the user. Each is stored through `record_turn` with its vectors made at once (as the memory
service makes them just after a turn), in a fresh session of a temporary database; the wall
time and this process's CPU time per turn are printed. `--busy` runs a busy loop per core
beside it. Nothing is cached between turns: each text differs.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import click  # noqa: E402

import lib.migrations as migrate  # noqa: E402
from lib.config import load_settings  # noqa: E402
from lib.db import connect  # noqa: E402
from lib.memory import store  # noqa: E402
from lib.memory.api import close_side_connections, record_turn  # noqa: E402


def answer(n: int) -> str:
    line = "{i}. Run `make target{i}` in the project folder, then check the log for errors."
    steps = "\n".join(line.format(i=i) for i in range(36))
    return f"Here is how to set up build {n}.\n\n## Steps\n{steps}"[:3000]


def paste(n: int) -> str:
    return "\n".join(f"{i:06d} INFO worker-{i % 7} handled request {n}-{i} in {i % 90} ms" for i in range(2300))


KINDS = {
    "short exchange (50 + 15 characters)": lambda n: (f"Remind me the plumber {n} comes on Monday.", "Noted: Monday."),
    "3,000-character assistant answer": lambda n: (f"How do I set up build {n}?", answer(n)),
    "100 KB paste by the user": lambda n: (paste(n), "That log looks healthy."),
}


@click.command()
@click.option("--turns", type=int, default=5, help="Turns of each kind.")
@click.option("--busy", is_flag=True, help="A busy loop per core running beside it.")
def main(turns: int, busy: bool) -> None:
    """Time storing and indexing turns of each kind."""
    cores = (os.cpu_count() or 1) if busy else 0
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(cores)]
    try:
        with tempfile.TemporaryDirectory(prefix="ash-index-cost-") as tmp:
            settings = load_settings({"ASH_HOME": tmp})
            conn = connect(settings.database_path)
            migrate.migrate(conn)
            session = store.open_session(conn, "bench", "warm", "1", "private")
            record_turn(conn, settings, session_id=session.id, user_id="1", user_text="warm up", answer_text="ok")
            for kind, make in KINDS.items():
                walls, cpus = [], []
                for n in range(turns):
                    session = store.open_session(conn, "bench", f"{kind}-{n}", "1", "private")
                    asked, said = make(n)
                    wall, cpu = time.perf_counter(), time.process_time()
                    record_turn(conn, settings, session_id=session.id, user_id="1", user_text=asked, answer_text=said)
                    walls.append((time.perf_counter() - wall) * 1000)
                    cpus.append((time.process_time() - cpu) * 1000)
                print(
                    f"{kind:<38} wall p50 {statistics.median(walls):7.0f} ms   "
                    f"CPU p50 {statistics.median(cpus):7.0f} ms{'   (busy)' if busy else ''}"
                )
            close_side_connections()
            conn.close()
    finally:
        for loop in loops:
            loop.kill()


if __name__ == "__main__":
    main()
