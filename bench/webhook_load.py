"""Webhook acknowledgement throughput and latency: Ash's webhook, Ash's bare /healthz, the seed's stack.

    .venv/bin/python bench/webhook_load.py [--seconds 10] [--connections 32] [--rounds 3]

One run, side by side, loopback only, with wrk (Debian: apt-get install -y wrk). Ash's /healthz
and webhook alternate for --rounds rounds on one server; their medians give the ratio. The load is
valid channel posts (tests/fixtures/telegram/update_channel_post.json) with a fresh update_id
per request: Ash stores each one and its inbox worker skips it later, so the figure is the
acknowledgement path (secret check, decode, insert, 200). The peer (bench/peers/seed_webhook.py,
FastAPI + uvicorn + aiogram + SQLAlchemy/aiosqlite) does the same work in its own venv.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.coldstart import free_port, wait_healthy  # noqa: E402
from bench.peers.setup_peer import ensure as ensure_peer  # noqa: E402

ASH = REPO / ".venv" / "bin" / "ash"
PEER = REPO / "bench" / "peers" / "seed_webhook.py"
UPDATE = REPO / "tests" / "fixtures" / "telegram" / "update_channel_post.json"
SECRET = "bench-secret-0123456789"  # noqa: S105 (a throwaway value for a local run)
TOKEN = "110201543:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"  # noqa: S105 (the Bot API docs' example token)

LUA = """
local template = [[%s]]
local counter = 0
-- A global, not a local: setup() sets it in each thread's own Lua state, and a local here
-- would shadow it (every thread would then send the same update_ids, half of them repeats).
offset = 0
local threads = 0
function setup(thread)
  thread:set("offset", threads * 100000000)
  threads = threads + 1
end
function request()
  counter = counter + 1
  local body = string.gsub(template, "UPDATE_ID", tostring(%d + offset + counter))
  return wrk.format("POST", nil, {["Content-Type"] = "application/json",
    ["X-Telegram-Bot-Api-Secret-Token"] = "%s"}, body)
end
"""


@dataclass
class Load:
    name: str
    rate: float
    p50_ms: float
    p99_ms: float
    errors: int
    requests: int


def _ms(value: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", value).groups()
    return float(number) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def run_wrk(name: str, url: str, seconds: int, connections: int, script: Path | None) -> Load:
    """One wrk run; its rate, p50/p99 and non-2xx count."""
    argv = ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--latency", "--timeout", "10s"]
    if script is not None:
        argv += ["-s", str(script)]
    out = subprocess.run([*argv, url], capture_output=True, text=True, check=True).stdout
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p50 = _ms(re.search(r"\s50%\s+(\S+)", out).group(1))
    p99 = _ms(re.search(r"\s99%\s+(\S+)", out).group(1))
    requests = int(re.search(r"(\d+) requests in", out).group(1))
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    socket_errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    errors = int(bad.group(1)) if bad else 0
    if socket_errors:
        errors += sum(int(x) for x in socket_errors.groups())
    return Load(name, rate, p50, p99, errors, requests)


def median_load(loads: list[Load]) -> Load:
    """The run with the median rate (its own latencies), errors summed over all runs."""
    middle = sorted(loads, key=lambda load: load.rate)[len(loads) // 2]
    errors = sum(load.errors for load in loads)
    return Load(middle.name, middle.rate, middle.p50_ms, middle.p99_ms, errors, sum(x.requests for x in loads))


def script_for(directory: Path, start: int) -> Path:
    """A wrk Lua script posting channel posts with fresh update_ids from `start`."""
    update = json.loads(UPDATE.read_text())
    update["update_id"] = "UPDATE_ID"
    template = json.dumps(update).replace('"UPDATE_ID"', "UPDATE_ID")
    path = directory / f"post-{start}.lua"
    path.write_text(LUA % (template, start, SECRET))
    return path


def start(argv: list[str], env: dict[str, str], cwd: Path, port: int) -> subprocess.Popen:
    proc = subprocess.Popen(
        argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    wait_healthy(port, time.perf_counter(), proc)
    return proc


def stop(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def stored(db: Path, table: str = "inbox") -> int:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    finally:
        conn.close()


def check_one(port: int) -> int:
    """POST one update by hand: the benchmark is void unless it is accepted."""
    body = UPDATE.read_bytes()
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/telegram/webhook",
        data=body,
        headers={"content-type": "application/json", "x-telegram-bot-api-secret-token": SECRET},
    )
    with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310 (a loopback http URL)
        return response.status


def measure(seconds: int, connections: int, rounds: int = 3) -> tuple[list[Load], list[float]]:
    """Ash /healthz, Ash webhook and the peer's webhook under the same load, one after another;
    also each round's webhook/healthz ratio (the webhook run against the /healthz run before it)."""
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed: apt-get install -y wrk")
    peer_python = ensure_peer()
    results: list[Load] = []
    ratios: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        home = tmp_path / "ash-home"
        home.mkdir()
        # The inbox worker skips channel posts without calling Telegram; the API base is a closed
        # local port all the same, so nothing can leave the machine.
        env = {
            **os.environ,
            "ASH_HOME": str(home),
            "TELEGRAM_WEBHOOK_SECRET": SECRET,
            "TELEGRAM_BOT_TOKEN": TOKEN,
            "TELEGRAM_API_BASE": "http://127.0.0.1:9",
        }
        for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ASH_CONFIG"):
            env.pop(name, None)
        port = free_port()
        ash = start([str(ASH), "serve", "--port", str(port)], env, home, port)
        try:
            assert check_one(port) == 200
            base = f"http://127.0.0.1:{port}"
            run_wrk("warm-up", f"{base}/telegram/webhook", 2, connections, script_for(tmp_path, 10_000_000))
            # Alternating rounds: a noisy spell on the machine then slows both alike.
            health, hooks = [], []
            for round_ in range(rounds):
                health.append(run_wrk("ash /healthz", f"{base}/healthz", seconds, connections, None))
                script = script_for(tmp_path, 20_000_000 + round_ * 1_000_000_000)
                hooks.append(run_wrk("ash webhook", f"{base}/telegram/webhook", seconds, connections, script))
                print(f"round {round_ + 1}: webhook/healthz {hooks[-1].rate / health[-1].rate:.2f}", file=sys.stderr)
            results += [median_load(health), median_load(hooks)]
            ratios.extend(h.rate / c.rate for h, c in zip(hooks, health, strict=True))
        finally:
            stop(ash)
        ash_rows = stored(home / "ash.db")
        # The same without a bot token: the inbox worker stays idle, so only the intake runs.
        idle_home = tmp_path / "ash-idle"
        idle_home.mkdir()
        idle_env = {k: v for k, v in env.items() if k != "TELEGRAM_BOT_TOKEN"} | {"ASH_HOME": str(idle_home)}
        port = free_port()
        ash = start([str(ASH), "serve", "--port", str(port)], idle_env, idle_home, port)
        try:
            base = f"http://127.0.0.1:{port}"
            script = script_for(tmp_path, 50_000_000)
            idle = run_wrk("ash webhook, inbox worker idle", f"{base}/telegram/webhook", seconds, connections, script)
            results.append(idle)
        finally:
            stop(ash)
        peer_db = tmp_path / "peer.db"
        port = free_port()
        peer_env = {**env, "PEER_DB": str(peer_db)}
        peer = start([str(peer_python), str(PEER), "--port", str(port)], peer_env, tmp_path, port)
        try:
            assert check_one(port) == 200
            base = f"http://127.0.0.1:{port}"
            run_wrk("warm-up", f"{base}/telegram/webhook", 2, connections, script_for(tmp_path, 30_000_000))
            script = script_for(tmp_path, 40_000_000)
            results.append(run_wrk("peer webhook", f"{base}/telegram/webhook", seconds, connections, script))
        finally:
            stop(peer)
        peer_rows = stored(peer_db)
    print(f"rows stored: ash {ash_rows}, peer {peer_rows}")
    return results, ratios


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3, help="alternating /healthz and webhook runs (medians)")
    args = parser.parse_args()
    results, ratios = measure(args.seconds, args.connections, args.rounds)
    print(
        f"| target | req/s | p50 ms | p99 ms | errors | ({args.connections} connections, {args.seconds} s each; "
        f"Ash's /healthz and webhook: median of {args.rounds} alternating runs) |"
    )
    print("|---|---|---|---|---|")
    for r in results:
        print(f"| {r.name} | {r.rate:.0f} | {r.p50_ms:.1f} | {r.p99_ms:.1f} | {r.errors} |")
    by = {r.name: r for r in results}
    ash, peer = by["ash webhook"], by["peer webhook"]
    print(f"webhook/healthz ratio: {statistics.median(ratios):.2f} (rounds: {', '.join(f'{r:.2f}' for r in ratios)})")
    print(f"ash/peer ratio: {ash.rate / peer.rate:.1f}")
    print(f"ash webhook p99: {ash.p99_ms:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
