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

Newest value: a question of category 3 whose answer does not speak of a contradiction asks for
a value that changed (BEAM's knowledge updates: its evidence is the turn with the new value).
The file does not name the turn with the old value, so the figure is a strict proxy: the share
of such questions whose newest evidence turn is in the top 10 and ranks above every turn of the
same speaker said before it that is also there (the old value's turn shares the question's
words and is said earlier). Only assistant chats (speakers "User" and "Assistant", as BEAM's
conversion writes them) have such questions: LoCoMo's category 3 is open-domain inference, and
a file without them prints no newest-value line. For what reaches the prompt the order is the one
the model reads: the person's standing instructions have a section of their own before the
memory section, so only those that are evidence count there (an old instruction is a rule to
follow, not an old value ranked first).

`--keep DIR` keeps the indexed database (and which message is which turn) in DIR and reuses it
on the next run with the same DIR: ranking changes can then be measured without indexing again
(indexing changes need a fresh DIR); each question's embedding is kept there too and reused, so
query latencies of such a run leave out the query embedding. `--dump FILE` writes every
question's rankings as JSON lines (the top 10 of each mode, and every item that reached the prompt).
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
import numpy as np  # noqa: E402

import lib.migrations as migrate  # noqa: E402
from lib.config import load_settings  # noqa: E402
from lib.db import connect  # noqa: E402
from lib.memory import store  # noqa: E402
from lib.memory.api import recall as recall_tool_search  # noqa: E402
from lib.memory.api import retrieve_context, shown_whole  # noqa: E402
from lib.memory.search import retrieval  # noqa: E402
from lib.memory.search.index import index_message  # noqa: E402
from lib.memory.search.parallel import close_side_connections  # noqa: E402
from lib.memory.search.retrieval import MODES, search_messages  # noqa: E402
from lib.memory.search.words import fts_query  # noqa: E402
from lib.tools.memory_tools import RECALL_LIMIT  # noqa: E402

DEFAULT_DATA = REPO.parent / "shared" / "eval" / "data" / "locomo-dev.json"
SMALL_TALK = REPO / "bench" / "data" / "small_talk.txt"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
EVIDENCE = re.compile(r"D\d+:\d+")
KS = (5, 10)
NEWEST = "newest value"
CONTRADICTION = re.compile(r"contradict", re.IGNORECASE)
BARE = "bm25-bare"
PROMPT = "prompt"
# What the model reads after one `recall` call with the question's own words (the least a model
# does for a question the prompt leaves open): the prompt's items and the call's.
RECALLED = "+recall"
BARE_SQL = "SELECT rowid FROM bare_fts WHERE bare_fts MATCH ? ORDER BY bm25(bare_fts) LIMIT ?"


def session_time(text: str) -> datetime:
    """LoCoMo's '1:56 pm on 8 May, 2023' as a UTC datetime."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def load_conversation(conn, sample: dict) -> tuple[str, dict[int, str], int]:
    """Write one conversation as one user's history; returns (user id, message id -> dia_id, turns).

    Message ids grow with the time a turn was said, so a smaller id is an earlier turn."""
    user_id = f"locomo-{sample['sample_id']}"
    conv = sample["conversation"]
    speaker_a = conv["speaker_a"]
    # Two people talking (LoCoMo) are both people, as members of a group chat are; only an
    # assistant chat (BEAM's) has Ash's side. The conversation step tells them apart by role.
    assistant_chat = is_assistant_chat(sample)
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
                "assistant" if assistant_chat and turn["speaker"] != speaker_a else "user",
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


def newest_value(qa: dict, evidence: set[str], ranked: list, speaker_of: dict, order_of: dict) -> bool | None:
    """For a question about a value that changed: did its newest evidence turn rank in the top 10
    above every earlier turn of the same speaker there? None for other questions."""
    if qa["category"] != 3 or CONTRADICTION.search(str(qa.get("answer", ""))):
        return None
    newest = max(evidence, key=lambda d: order_of[d])
    top = [d for d in ranked[:10] if d is not None]
    if newest not in top:
        return False
    above = top[: top.index(newest)]
    return not any(
        speaker_of[d] == speaker_of[newest] and order_of[d] < order_of[newest] and d not in evidence for d in above
    )


def as_read(shown: list, dia_of: dict, evidence: set[str]) -> list:
    """The messages of a prompt in the order the model reads them for a question about a value:
    the standing instructions that are evidence (their section comes first), then the memory
    section (the other standing instructions are rules to follow, not values)."""
    messages = [r for r in shown if r.source_type == "message"]
    standing = [dia_of.get(r.id) for r in messages if r.metadata.get("standing")]
    memory = [dia_of.get(r.id) for r in messages if not r.metadata.get("standing")]
    return [d for d in standing if d in evidence] + memory


def is_assistant_chat(sample: dict) -> bool:
    """A person and an assistant (BEAM's conversion, whose speakers are "User" and "Assistant"),
    where category 3 is knowledge updates; in LoCoMo's conversations between people it is
    open-domain inference."""
    conversation = sample["conversation"]
    return (conversation.get("speaker_a"), conversation.get("speaker_b")) == ("User", "Assistant")


def turn_facts(sample: dict) -> tuple[dict[str, str], dict[str, int]]:
    """Each turn's speaker and its place in the conversation (dia_id -> ...)."""
    conv = sample["conversation"]
    numbers = sorted(int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k))
    turns = [t for n in numbers for t in conv[f"session_{n}"]]
    return {t["dia_id"]: t["speaker"] for t in turns}, {t["dia_id"]: i for i, t in enumerate(turns)}


def prepare(conn, settings, samples: list[dict], keep: Path | None) -> tuple[list, int, float]:
    """Load and index every conversation (or reuse the kept ones): [(user id, message id -> dia_id)]."""
    saved = keep / "turns.json" if keep else None
    if saved and saved.exists():
        loaded = json.loads(saved.read_text())
        if len(loaded) >= len(samples):
            return [(u, {int(k): v for k, v in d.items()}) for u, d in loaded[: len(samples)]], 0, 0.0
    loaded, turns, seconds = [], 0, 0.0
    for sample in samples:
        user_id, dia_of, count = load_conversation(conn, sample)
        turns += count
        started = time.perf_counter()
        index_all(conn, settings, list(dia_of))
        seconds += time.perf_counter() - started
        loaded.append((user_id, dia_of))
    if saved:
        saved.write_text(json.dumps(loaded))
    return loaded, turns, seconds


def keep_query_vectors(keep: Path):
    """Embed each question once across runs (kept in `keep`): the bench's time goes to ranking.
    Returns the function that saves them."""
    texts, matrix = keep / "queries.json", keep / "queries.npy"
    known = dict(zip(json.loads(texts.read_text()), np.load(matrix), strict=True)) if texts.exists() else {}
    embed = retrieval._embed_query

    def cached(conn, settings, query: str):
        if query not in known:
            vector = embed(conn, settings, query)
            if vector is None:
                return None
            known[query] = vector
        return known[query]

    def save() -> None:
        if known:
            texts.write_text(json.dumps(list(known)))
            np.save(matrix, np.stack(list(known.values())))

    retrieval._embed_query = cached
    return save


def ranking(conn, settings, mode: str, user_id: str, question: str, dia_of: dict) -> list:
    if mode == BARE:
        return [dia_of.get(i) for i in bare_search(conn, question, max(KS))]
    found = search_messages(conn, settings, user_id=user_id, query=question, limit=max(KS), mode=mode)
    return [dia_of.get(r.id) for r in found]


@click.command()
@click.argument("data_file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=DEFAULT_DATA)
@click.option("--conversations", type=int, default=None, help="Only the first N conversations (quick runs).")
@click.option(
    "--tuned",
    type=int,
    default=0,
    help="Also report the first N conversations (those looked at while tuning) and the rest apart.",
)
@click.option(
    "--keep", type=click.Path(file_okay=False, path_type=Path), default=None, help="Keep (or reuse) the index here."
)
@click.option("--dump", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Rankings as JSON lines.")
def main(data_file: Path, conversations: int | None, tuned: int, keep: Path | None, dump: Path | None) -> None:
    """Run the LoCoMo retrieval benchmark on DATA_FILE and print recall per category and mode."""
    samples = json.loads(data_file.read_text(encoding="utf-8"))[:conversations]
    modes = [*MODES, BARE]
    groups = {"all": range(len(samples))}
    if 0 < tuned < len(samples):
        groups |= {
            f"tuned (first {tuned})": range(tuned),
            f"held out (last {len(samples) - tuned})": range(tuned, len(samples)),
        }
    dumped = []
    with tempfile.TemporaryDirectory(prefix="ash-locomo-") as tmp:
        home = keep or Path(tmp)
        home.mkdir(parents=True, exist_ok=True)
        settings = load_settings({"ASH_HOME": str(home)})
        conn = connect(settings.database_path)
        migrate.migrate(conn)
        # recall[group][mode][k][category] -> list of per-question recall@k
        recall = {
            g: {m: {k: {} for k in KS} for m in modes} | {PROMPT: {"all": {}}, RECALLED: {"all": {}}} for g in groups
        }
        newest = {g: {m: [] for m in [*modes, PROMPT]} for g in groups}
        latency: dict[str, list[float]] = {m: [] for m in modes}
        prompt_items: list[int] = []
        small_talk = [line.strip() for line in SMALL_TALK.read_text().splitlines() if line.strip()[:1] not in ("", "#")]
        small_talk_items: list[int] = []
        small_talk_standing: list[int] = []
        questions = skipped = 0
        loaded, turns, index_seconds = prepare(conn, settings, samples, keep)
        save_queries = keep_query_vectors(keep) if keep else None
        for number, (sample, (user_id, dia_of)) in enumerate(zip(samples, loaded, strict=True)):
            index_bare(conn, list(dia_of))
            known = set(dia_of.values())
            speaker_of, order_of = turn_facts(sample)
            updates = is_assistant_chat(sample)
            mine = [g for g, members in groups.items() if number in members]
            for qa in sample["qa"]:
                evidence = {e for entry in qa.get("evidence", []) for e in EVIDENCE.findall(entry)} & known
                if not evidence:
                    skipped += 1
                    continue
                questions += 1
                category = CATEGORIES.get(qa["category"], str(qa["category"]))
                ranked_by = {}
                for mode in modes:
                    started = time.perf_counter()
                    ranked = ranking(conn, settings, mode, user_id, qa["question"], dia_of)
                    latency[mode].append((time.perf_counter() - started) * 1000)
                    ranked_by[mode] = ranked
                    for k in KS:
                        hit = len(evidence & set(ranked[:k])) / len(evidence)
                        for group in mine:
                            recall[group][mode][k].setdefault(category, []).append(hit)
                shown = retrieve_context(conn, settings, user_id=user_id, query=qa["question"])
                prompt_items.append(len(shown))
                ranked_by[PROMPT] = [dia_of.get(r.id) for r in shown if r.source_type == "message"]
                reached = set(ranked_by[PROMPT])
                seen = frozenset(shown_whole(shown))
                more, _ = recall_tool_search(
                    conn, settings, user_id=user_id, query=qa["question"], seen=seen, limit=RECALL_LIMIT
                )
                ranked_by[RECALLED] = [dia_of.get(r.id) for r in more if r.source_type == "message"]
                for group in mine:
                    for mode, found in ((PROMPT, reached), (RECALLED, reached | set(ranked_by[RECALLED]))):
                        recall[group][mode]["all"].setdefault(category, []).append(
                            len(evidence & found) / len(evidence)
                        )
                # The prompt shows the person's standing instructions in a section of their own,
                # before what memory found (lib/agent/prompt.py): an old instruction there is not
                # an old value ranked first. For the newest value the prompt is read as the model
                # reads it: the standing turns that are evidence, then the memory section's order.
                ordered = {m: r for m, r in ranked_by.items() if m != RECALLED} | {
                    PROMPT: as_read(shown, dia_of, evidence)
                }
                for mode, ranked in ordered.items() if updates else ():
                    won = newest_value(qa, evidence, ranked, speaker_of, order_of)
                    for group in mine if won is not None else ():
                        newest[group][mode].append(float(won))
                dumped.append(
                    {"sample": sample["sample_id"], "question": qa["question"], "category": category}
                    | {"evidence": sorted(evidence), "answer": str(qa.get("answer", ""))[:300]}
                    | {"ranked": {m: r if m in (PROMPT, RECALLED) else r[:10] for m, r in ranked_by.items()}}
                )
            for message in small_talk:  # against this conversation as a populated memory
                given = retrieve_context(conn, settings, user_id=user_id, query=message)
                # The person's standing instructions come with every message, on purpose: apart.
                small_talk_items.append(sum(not r.metadata.get("standing") for r in given))
                small_talk_standing.append(len(given) - small_talk_items[-1])
        if save_queries:
            save_queries()
        close_side_connections()  # hybrid searches' second connections, before the file goes
        conn.close()
    if dump:
        dump.write_text("".join(json.dumps(d) + "\n" for d in dumped))

    print(
        f"LoCoMo retrieval: {data_file.name}, {len(samples)} conversations, {turns} turns indexed, "
        f"{questions} questions ({skipped} without evidence skipped)"
    )
    print(
        f"indexing: {index_seconds * 1000 / max(turns, 1):.1f} ms per turn "
        f"(chunks, FTS5 and local embeddings; {index_seconds:.1f} s in all)"
    )
    for group in groups:
        print_table(f"\n{group}:", recall[group], [*modes, PROMPT, RECALLED])
        if newest[group]["hybrid"]:
            figures = ", ".join(f"{m} {mean(v):.3f}" for m, v in newest[group].items())
            print(f"{NEWEST} ({len(newest[group]['hybrid'])} questions, updated turn first): {figures}")
    print(f"\nprompt: {mean(prompt_items):.1f} items on average reach the prompt (k = all of them)")
    print(
        f"small talk ({len(small_talk)} messages of {SMALL_TALK.name} x {len(samples)} memories): "
        f"{mean(small_talk_items):.2f} items on average reach the prompt, at most {max(small_talk_items, default=0)} "
        f"(and {mean(small_talk_standing):.2f} standing instructions, which come with every message)"
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
