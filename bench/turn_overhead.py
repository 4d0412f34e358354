"""Per-turn overhead outside the LLM, with a zero-latency in-process model, at 1k/10k/100k stored messages.

    .venv/bin/python bench/turn_overhead.py [--sizes 1000,10000,100000] [--turns 30]

The asking user's history is written through the real write path (store.add_message, then
index.index_messages with the configured local embeddings, texts repeating every 2,000 messages so
the embedding cache serves the rest), batched; databases are kept in
bench/results/ and reused by later runs. Each measured turn runs lib.agent.run_turn (session,
profile, history, hybrid retrieval with the query embedding, prompt, then persistence and
indexing) with the provider replaced by a stub that answers at once. As in the server, a turn's
vectors are embedded by the memory service just after the turn, so they are not in the figure.
Three figures per size: turn start to the first model request, the model's answer to the
exchange being stored, and (through the inbox worker, as in the server) the update being received
to the first model request.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import random
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402

import lib.migrations as migrate  # noqa: E402
from lib.agent import TurnInput  # noqa: E402
from lib.db import Database, connect  # noqa: E402
from lib.llm.types import Completed, Response, TextBlock, TextDelta, Usage  # noqa: E402
from lib.memory.service import MemoryService  # noqa: E402

RESULTS = REPO / "bench" / "results"
PERIOD = 2000
USER = "424242"


def _vocabulary() -> tuple[list[str], list[float]]:
    """English words from the vendored tokenizer (whole words, 3+ letters) with Zipf weights:
    a few words are everywhere and most are rare, as in real chat, so full-text search is
    neither flattered nor punished (a tiny vocabulary made every word match a third of all rows)."""
    from bench.retrieval_100k import vocabulary

    words = vocabulary()
    return words, [1.0 / rank for rank in range(1, len(words) + 1)]


WORDS, WEIGHTS = _vocabulary()


class Clock:
    """Marks set by the stub model and the wrapped persistence step."""

    first_request: float = 0.0
    answered: float = 0.0
    stored: float = 0.0


class StubProvider:
    """A model that answers immediately; it notes when it was asked and when it answered."""

    name = "anthropic"

    async def complete(self, request):
        return self._response()

    async def stream(self, request):
        Clock.first_request = time.perf_counter()
        yield TextDelta("Noted.")
        response = self._response()
        Clock.answered = time.perf_counter()
        yield Completed(response)

    def _response(self) -> Response:
        return Response([TextBlock("Noted.")], "end_turn", Usage(100, 3), "stub", "anthropic")

    async def aclose(self) -> None:
        return None


class NullSink:
    """Telegram is not part of this figure."""

    async def typing(self) -> None:
        return None

    async def update(self, text: str) -> None:
        return None

    async def finish(self, text: str) -> None:
        return None

    async def fail(self, text: str) -> None:
        return None


def sentence(i: int) -> str:
    """Message i's text. Texts repeat every PERIOD messages, so past the first period the chunks'
    embeddings come from the real embedding cache and 100k messages are written in minutes."""
    rng = random.Random(i % PERIOD)
    return " ".join(rng.choices(WORDS, WEIGHTS, k=rng.randint(6, 18))).capitalize() + "."


def fill(db_path: Path, target: int, settings) -> None:
    """Grow the user's history to `target` messages through the real write path, in batches."""
    from lib.memory import store
    from lib.memory.search.index import index_messages

    conn = connect(db_path)
    migrate.migrate(conn)
    have = conn.execute("SELECT count(*) FROM messages WHERE owner_user_id = ?", (USER,)).fetchone()[0]
    started = time.perf_counter()
    while have < target:
        batch = min(1000, target - have)
        session = store.open_session(conn, "telegram", "history", USER, "private")
        with conn:
            ids = [
                store.add_message(conn, session.id, USER, "user" if i % 2 == 0 else "assistant", sentence(i))
                for i in range(have, have + batch)
            ]
        index_messages(conn, settings, ids)
        have += batch
        rate = have / (time.perf_counter() - started)
        print(f"  {have} messages stored and indexed ({rate:.0f}/s)", file=sys.stderr)
    conn.close()


async def no_model(**_) -> str:
    """The memory service's model: never asked here (its extraction loop is not started)."""
    raise AssertionError("not used in this benchmark")


async def measure_turns(db_path: Path, settings, turns: int) -> tuple[list[float], list[float]]:
    import lib.llm.router as router
    from lib.agent import run_turn
    from lib.memory import api as memory_api
    from lib.runtime import Runtime

    router.build_provider = lambda settings, llm: StubProvider()
    original = memory_api.record_turn

    def timed_record_turn(*args, **kwargs):
        result = original(*args, **kwargs)
        Clock.stored = time.perf_counter()
        return result

    memory_api.record_turn = timed_record_turn
    before_model, after_model = [], []
    rng = random.Random(7)
    async with httpx.AsyncClient() as http:
        runtime = Runtime(settings=settings, db=Database(db_path), http_client=http)
        # As in the server: a memory service is present, so the turn's vectors are embedded just
        # after the turn (not started here: that work is off the measured path by design).
        housekeeper = MemoryService(runtime.db, settings, complete=no_model)
        for i in range(turns + 3):
            first, second = rng.choices(WORDS, WEIGHTS, k=2)
            text = f"What did I say about the {first} and the {second}?"
            turn = TurnInput(provider="telegram", chat_id="bench-chat", user_id=USER, text=text, chat_type="private")
            started = time.perf_counter()
            await run_turn(runtime, turn, NullSink(), housekeeper=housekeeper)
            if i >= 3:  # the first turns load the embedding model and warm caches
                before_model.append((Clock.first_request - started) * 1000)
                after_model.append((Clock.stored - Clock.answered) * 1000)
        runtime.db.close()
    memory_api.record_turn = original
    return before_model, after_model


async def measure_received_turns(db_path: Path, settings, turns: int) -> list[float]:
    """Received to first model request through the whole server path: the update is stored as the
    webhook stores it, the inbox worker is woken, claims it, checks access, starts the typing action
    and runs the turn. The Bot API is a zero-latency respx stub (tests/support/telegram.py)."""
    import json

    import respx

    import lib.llm.router as router
    from lib.agent import run_turn
    from lib.runtime import Runtime
    from lib.telegram.intake import store_update
    from lib.telegram.updates import telegram_worker
    from tests.support.telegram import FakeBotAPI, private_text

    router.build_provider = lambda settings, llm: StubProvider()
    received = []
    rng = random.Random(11)
    with respx.mock(assert_all_called=False) as mock:
        FakeBotAPI(mock, base=settings.secrets.telegram_api_base, token=settings.secrets.telegram_bot_token)
        runtime = Runtime(settings=settings, db=Database(db_path))
        housekeeper = MemoryService(runtime.db, settings, complete=no_model)  # present, not started
        worker = telegram_worker(runtime, runner=functools.partial(run_turn, runtime, housekeeper=housekeeper))
        await worker.start()
        update_id = int(time.time() * 1000)  # fresh ids across runs on the kept database
        for i in range(turns + 3):
            first, second = rng.choices(WORDS, WEIGHTS, k=2)
            update_id += 1
            body = json.dumps(private_text(update_id, f"What did I say about the {first} and the {second}?", int(USER)))
            Clock.first_request = 0.0
            started = time.perf_counter()
            await asyncio.to_thread(store_update, runtime, body.encode())  # as the webhook's writer does
            worker.kick()
            while not Clock.first_request or worker._jobs:
                await asyncio.sleep(0.0005)
            if i >= 3:
                received.append((Clock.first_request - started) * 1000)
        await worker.stop()
        await runtime.close_http()
        runtime.db.close()
    return received


def warm_page_cache(db_path: Path) -> None:
    """Read the database files once. The figure is a turn in steady state; on this VM the kernel
    reclaims idle page cache within minutes, and a 300 MB database read back from disk turn by
    turn made the 100k figures swing from 20 to 35 ms (p95 160 ms) depending on what ran before."""
    for path in (db_path, Path(f"{db_path}-wal")):
        if path.exists():
            with path.open("rb") as f:
                while f.read(1 << 20):
                    pass


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--turns", type=int, default=30)
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    home = RESULTS / "turn-overhead-home"
    home.mkdir(exist_ok=True)
    os.environ["ASH_HOME"] = str(home)
    (home / "config.toml").write_text(
        f"owner = {USER}\n[memory]\nextraction_enabled = false\ncompaction_enabled = false\n", encoding="utf-8"
    )
    os.environ.setdefault("ANTHROPIC_API_KEY", "stub")
    # The Bot API is a respx stub on this made-up origin; nothing leaves the machine.
    os.environ["TELEGRAM_BOT_TOKEN"] = "110201543:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"  # noqa: S105 (the docs example)
    os.environ["TELEGRAM_API_BASE"] = "https://bot-api.invalid"
    from lib.config import load_settings

    settings = load_settings()
    print(
        "| stored messages | start to first model request p50 / p95 ms | answer to stored p50 / p95 ms "
        "| received to first model request (inbox worker) p50 / p95 ms |"
    )
    print("|---|---|---|---|")
    for size in (int(s) for s in args.sizes.split(",")):
        db_path = RESULTS / f"turn-overhead-{size}.db"
        fill(db_path, size, settings)
        warm_page_cache(db_path)
        before, after = asyncio.run(measure_turns(db_path, settings, args.turns))
        warm_page_cache(db_path)
        received = asyncio.run(measure_received_turns(db_path, settings, args.turns))
        print(
            f"| {size} | {statistics.median(before):.1f} / {pct(before, 0.95):.1f} "
            f"| {statistics.median(after):.1f} / {pct(after, 0.95):.1f} "
            f"| {statistics.median(received):.1f} / {pct(received, 0.95):.1f} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
