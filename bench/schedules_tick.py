"""What 10,000 active scheduled tasks add to a scheduler tick, against a database with none.

    .venv/bin/python bench/schedules_tick.py [--schedules 10000] [--ticks 2000]

A tick is what the server's scheduler does each time its timer (or the backstop tick) wakes it
(lib/inbox/scheduler.py): fire what is due (`fire_due`: the due-tasks query and, per due task,
the run record, the task's next time and the inbox row, in one write transaction) and find the
earliest due task to arm the timer for (`next_due_at`). Each database is a fresh migrated file
holding `--schedules` waiting tasks (daily cron tasks, 15-minute intervals and one-time
reminders spread over the next 30 days) plus one one-time task per firing tick, due a second
apart. Two figures per database: an idle tick (nothing due, the common case) and a tick that
fires one task (through the inbox, as in the server). The query plans are printed too: the due
query must SEARCH the partial index `schedules_due`, never SCAN the table.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from lib.config import Config, Secrets, Settings  # noqa: E402
from lib.db import connect, immediate, iso  # noqa: E402
from lib.inbox.scheduler import fire_due  # noqa: E402
from lib.migrations import migrate  # noqa: E402
from lib.schedule import store  # noqa: E402
from lib.schedule.times import CRON, INTERVAL, ONCE  # noqa: E402

BOT = 1
T0 = 2_000_000_000.0  # a fixed "now" (2033): nothing depends on the machine's clock

INSERT_SQL = """
INSERT INTO schedules (user_id, chat_id, kind, starts_at, interval_seconds, cron, timezone, action, text,
    next_run_at, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, 'Europe/Lisbon', 'message', 'x', ?, ?, ?)
"""


def settings(path: Path) -> Settings:
    return Settings(
        config=Config(),
        secrets=Secrets(),
        home=path.parent,
        config_path=path.parent / "config.toml",
        config_file_found=False,
        database_path=path,
        workspace=REPO / "workspace",
    )


def fill(path: Path, waiting: int, firing: int) -> None:
    """`waiting` tasks due over the next 30 days (written directly: the bench measures ticks, not
    making tasks), and `firing` one-time tasks due at T0 + 1, T0 + 2, ..."""
    conn = connect(path)
    migrate(conn)
    rng = random.Random(7)
    made = iso(T0)
    rows = []
    for i in range(waiting):
        kind = (ONCE, INTERVAL, CRON)[i % 3]
        due = T0 + 3600 + rng.random() * 30 * 86400
        interval = 900 if kind == INTERVAL else None
        cron = f"{rng.randrange(60)} {rng.randrange(24)} * * *" if kind == CRON else None
        rows.append((str(1000 + i % 500), str(1000 + i % 500), kind, due, interval, cron, due, made, made))
    for i in range(firing):
        due = T0 + 1 + i
        rows.append(("7", "7", ONCE, due, None, None, due, made, made))
    with immediate(conn):
        conn.executemany(INSERT_SQL, rows)
    conn.execute("ANALYZE")
    conn.close()


def plans(conn) -> list[str]:
    found = []
    for sql, params in ((store.DUE_SQL, {"now": T0, "limit": 200}), (store.NEXT_DUE_SQL, {})):
        found += [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params)]
    return found


def measure(waiting: int, ticks: int, fires: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ash.db"
        fill(path, waiting, fires)
        conn = connect(path)
        conf = settings(path)
        idle = []
        for _ in range(ticks):
            started = time.perf_counter()
            fire_due(conn, conf, BOT, T0)
            store.next_due_at(conn)
            idle.append(time.perf_counter() - started)
        firing = []
        for i in range(fires):
            started = time.perf_counter()
            queued = fire_due(conn, conf, BOT, T0 + 1 + i + 0.5)
            store.next_due_at(conn)
            firing.append(time.perf_counter() - started)
            assert len(queued) == 1, queued
        shown = plans(conn)
        conn.close()
    return {"idle": idle, "firing": firing, "plans": shown}


def ms(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=10_000)
    parser.add_argument("--ticks", type=int, default=2000)
    parser.add_argument("--fires", type=int, default=500)
    args = parser.parse_args()
    results = {n: measure(n, args.ticks, args.fires) for n in (0, args.schedules)}
    for line in results[args.schedules]["plans"]:
        print(f"plan: {line}")
    for kind in ("idle", "firing"):
        for n, found in results.items():
            samples = found[kind]
            print(
                f"{kind} tick, {n} waiting tasks: median {statistics.median(samples) * 1000:.3f} ms, "
                f"p99 {ms(samples, 0.99):.3f} ms"
            )
        added = statistics.median(results[args.schedules][kind]) - statistics.median(results[0][kind])
        print(f"{kind} tick: {args.schedules} tasks add {added * 1000:.3f} ms (median)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
