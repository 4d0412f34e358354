"""Retrieval quality on LoCoMo: recall@5/@10 of the evidence turns, BM25 vs vectors vs hybrid.

    .venv/bin/python bench/locomo.py [DATA_FILE] [--tuned 3]

DATA_FILE defaults to ../shared/eval/data/locomo-dev.json (relative to the repository); any
file in the LoCoMo format works. The protocol is ../shared/eval/README.md: each conversation
becomes one user's history, written through the real write path (store.add_message, then
index.index_message) into a temporary database; every question is asked through the real
retrieval path (retrieval.search_messages for that user). Only session turns are indexed (the
text plus the image caption); observation and the summaries, which carry the gold ids, never.
Also in the same run: `bm25-bare`, plain FTS5 BM25 over the bare turn texts (no context, no
vectors: the baseline every change must beat), and `prompt`, what actually reaches the prompt
(memory.api.retrieve_context: relevance floor and token budget applied, any number of items).
With `--tuned N` the first N conversations (the ones tuning looked at) and the rest are also
reported apart. The last line reads `hybrid recall@10 overall: 0.NNN`.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import click  # noqa: E402

import lib.migrations as migrate  # noqa: E402
from lib.config import load_settings  # noqa: E402
from lib.db import connect  # noqa: E402
from lib.memory import store  # noqa: E402
from lib.memory.api import retrieve_context  # noqa: E402
from lib.memory.search.index import index_message  # noqa: E402
from lib.memory.search.parallel import close_side_connections  # noqa: E402
from lib.memory.search.retrieval import MODES, search_messages  # noqa: E402
from lib.memory.search.words import fts_query  # noqa: E402

DEFAULT_DATA = REPO.parent / "shared" / "eval" / "data" / "locomo-dev.json"
SMALL_TALK = REPO / "bench" / "data" / "small_talk.txt"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
EVIDENCE = re.compile(r"D\d+:\d+")
KS = (5, 10)
BARE = "bm25-bare"
PROMPT = "prompt"
BARE_SQL = "SELECT rowid FROM bare_fts WHERE bare_fts MATCH ? ORDER BY bm25(bare_fts) LIMIT ?"


def session_time(text: str) -> datetime:
    """LoCoMo's '1:56 pm on 8 May, 2023' as a UTC datetime."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def load_conversation(conn, sample: dict) -> tuple[str, dict[int, str], int]:
    """Write one conversation as one user's history; returns (user id, message id -> dia_id, turns)."""
    user_id = f"locomo-{sample['sample_id']}"
    conv = sample["conversation"]
    speaker_a = conv["speaker_a"]
    numbers = sorted(int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k))
    dia_of: dict[int, str] = {}
    for number in numbers:
        start = session_time(conv[f"session_{number}_date_time"])
        session = store.open_session(conn, "locomo", f"{user_id}-{number}", user_id, "private")
        ids = []
        for i, turn in enumerate(conv[f"session_{number}"]):
            metadata = {"speaker": turn["speaker"]}
            if turn.get("blip_caption"):
                metadata["image_caption"] = turn["blip_caption"]
            message_id = store.add_message(
                conn,
                session.id,
                user_id,
                "user" if turn["speaker"] == speaker_a else "assistant",
                turn["text"],
                metadata=metadata,
                created_at=iso(start + timedelta(seconds=30 * i)),
            )
            dia_of[message_id] = turn["dia_id"]
            ids.append(message_id)
        store.close_session(conn, "locomo", f"{user_id}-{number}")
    return user_id, dia_of, len(dia_of)


def index_all(conn, settings, message_ids: list[int]) -> None:
    for message_id in message_ids:
        index_message(conn, settings, message_id)


def index_bare(conn, message_ids: list[int]) -> None:
    """The baseline's index: each turn's own text (and image caption) alone, same tokenizer; one
    conversation at a time (the table is emptied first)."""
    conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS bare_fts USING fts5 "
        "(content, tokenize = 'porter unicode61 remove_diacritics 2')"
    )
    with conn:
        conn.execute("DELETE FROM bare_fts")
        for message_id in message_ids:
            content, metadata = conn.execute(
                "SELECT content, metadata FROM messages WHERE id = ?", (message_id,)
            ).fetchone()
            caption = json.loads(metadata).get("image_caption")
            text = f"{content} [image: {caption}]" if caption else content
            conn.execute("INSERT INTO bare_fts (rowid, content) VALUES (?, ?)", (message_id, text))


def bare_search(conn, query: str, limit: int) -> list[int]:
    expression = fts_query(query)
    if not expression:
        return []
    return [row[0] for row in conn.execute(BARE_SQL, (expression, limit))]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


def print_table(title: str, recall: dict, modes: list[str]) -> None:
    names = [*CATEGORIES.values()]
    print(title)
    print(f"{'mode':<10} {'k':>3} " + " ".join(f"{n:>12}" for n in names) + f" {'overall':>9}")
    for mode in modes:
        for k in recall[mode]:
            per = recall[mode][k]
            cells = " ".join(f"{mean(per.get(n, [])):>12.3f}" for n in names)
            overall = mean([v for values in per.values() for v in values])
            print(f"{mode:<10} {k:>3} {cells} {overall:>9.3f}")


@click.command()
@click.argument("data_file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=DEFAULT_DATA)
@click.option("--conversations", type=int, default=None, help="Only the first N conversations (quick runs).")
@click.option(
    "--tuned",
    type=int,
    default=0,
    help="Also report the first N conversations (those looked at while tuning) and the rest apart.",
)
def main(data_file: Path, conversations: int | None, tuned: int) -> None:
    """Run the LoCoMo retrieval benchmark on DATA_FILE and print recall per category and mode."""
    samples = json.loads(data_file.read_text(encoding="utf-8"))[:conversations]
    modes = [*MODES, BARE]
    groups = {"all": range(len(samples))}
    if 0 < tuned < len(samples):
        groups |= {
            f"tuned (first {tuned})": range(tuned),
            f"held out (last {len(samples) - tuned})": range(tuned, len(samples)),
        }
    with tempfile.TemporaryDirectory(prefix="ash-locomo-") as tmp:
        settings = load_settings({"ASH_HOME": tmp})
        conn = connect(settings.database_path)
        migrate.migrate(conn)
        # recall[group][mode][k][category] -> list of per-question recall@k
        recall = {g: {m: {k: {} for k in KS} for m in modes} | {PROMPT: {"all": {}}} for g in groups}
        latency: dict[str, list[float]] = {m: [] for m in modes}
        prompt_items: list[int] = []
        small_talk = [line.strip() for line in SMALL_TALK.read_text().splitlines() if line.strip()[:1] not in ("", "#")]
        small_talk_items: list[int] = []
        turns = questions = skipped = 0
        index_seconds = 0.0
        for number, sample in enumerate(samples):
            user_id, dia_of, count = load_conversation(conn, sample)
            turns += count
            started = time.perf_counter()
            index_all(conn, settings, list(dia_of))
            index_seconds += time.perf_counter() - started
            index_bare(conn, list(dia_of))
            known = set(dia_of.values())
            mine = [g for g, members in groups.items() if number in members]
            for qa in sample["qa"]:
                evidence = {e for entry in qa.get("evidence", []) for e in EVIDENCE.findall(entry)} & known
                if not evidence:
                    skipped += 1
                    continue
                questions += 1
                category = CATEGORIES.get(qa["category"], str(qa["category"]))
                for mode in modes:
                    started = time.perf_counter()
                    if mode == BARE:
                        ranked = [dia_of.get(i) for i in bare_search(conn, qa["question"], max(KS))]
                    else:
                        found = search_messages(
                            conn, settings, user_id=user_id, query=qa["question"], limit=max(KS), mode=mode
                        )
                        ranked = [dia_of.get(r.id) for r in found]
                    latency[mode].append((time.perf_counter() - started) * 1000)
                    for k in KS:
                        hit = len(evidence & set(ranked[:k])) / len(evidence)
                        for group in mine:
                            recall[group][mode][k].setdefault(category, []).append(hit)
                shown = retrieve_context(conn, settings, user_id=user_id, query=qa["question"])
                prompt_items.append(len(shown))
                reached = {dia_of.get(r.id) for r in shown if r.source_type == "message"}
                for group in mine:
                    recall[group][PROMPT]["all"].setdefault(category, []).append(
                        len(evidence & reached) / len(evidence)
                    )
            for message in small_talk:  # against this conversation as a populated memory
                small_talk_items.append(len(retrieve_context(conn, settings, user_id=user_id, query=message)))
        close_side_connections()  # hybrid searches' second connections, before the file goes
        conn.close()

    print(
        f"LoCoMo retrieval: {data_file.name}, {len(samples)} conversations, {turns} turns, "
        f"{questions} questions ({skipped} without evidence skipped)"
    )
    print(
        f"indexing: {index_seconds * 1000 / max(turns, 1):.1f} ms per turn "
        f"(chunks, FTS5 and local embeddings; {index_seconds:.1f} s in all)"
    )
    for group in groups:
        print_table(f"\n{group}:", recall[group], [*modes, PROMPT])
    print(f"\nprompt: {mean(prompt_items):.1f} items on average reach the prompt (k = all of them)")
    print(
        f"small talk ({len(small_talk)} messages of {SMALL_TALK.name} x {len(samples)} memories): "
        f"{mean(small_talk_items):.2f} items on average reach the prompt, at most {max(small_talk_items, default=0)}"
    )
    for mode in modes:
        print(
            f"query latency {mode}: p50 {percentile(latency[mode], 0.5):.1f} ms, "
            f"p95 {percentile(latency[mode], 0.95):.1f} ms"
        )
    overall = mean([v for values in recall["all"]["hybrid"][10].values() for v in values])
    print(f"hybrid recall@10 overall: {overall:.3f}")


if __name__ == "__main__":
    main()
