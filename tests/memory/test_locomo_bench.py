"""bench/locomo.py on a small file of both kinds: the newest-value figure counts the assistant
chats' knowledge updates (category 3 there), never LoCoMo's category 3 (open-domain)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _session(speakers_and_texts: list[tuple[str, str]], number: int) -> list[dict]:
    return [{"speaker": s, "dia_id": f"D{number}:{i}", "text": t} for i, (s, t) in enumerate(speakers_and_texts, 1)]


ASSISTANT_CHAT = {
    "sample_id": "assistant-chat",
    "conversation": {
        "speaker_a": "User",
        "speaker_b": "Assistant",
        "session_1_date_time": "12:00 am on 12 March, 2024",
        "session_1": _session(
            [
                ("User", "My budget for new running sneakers is $150, can you suggest a few pairs?"),
                ("Assistant", "Sure! Within $150 the Brooks Ghost and the Nike Pegasus are good picks."),
            ],
            1,
        ),
        "session_2_date_time": "12:00 am on 2 April, 2024",
        "session_2": _session(
            [
                ("User", "I got a bonus, so my sneakers budget is now $220."),
                ("Assistant", "Nice! With $220 you can also look at the Ultraboost."),
            ],
            2,
        ),
    },
    "qa": [{"question": "What is my budget for sneakers?", "answer": "$220", "evidence": ["D2:1"], "category": 3}],
}

PEOPLE_CHAT = {
    "sample_id": "people-chat",
    "conversation": {
        "speaker_a": "Ana",
        "speaker_b": "Ben",
        "session_1_date_time": "1:00 pm on 3 May, 2023",
        "session_1": _session(
            [
                ("Ana", "I have been volunteering at the animal shelter every Saturday."),
                ("Ben", "That's lovely, you always liked dogs."),
            ],
            1,
        ),
    },
    "qa": [
        {
            "question": "Would Ana likely adopt a dog?",
            "answer": "Likely yes",
            "evidence": ["D1:1"],
            "category": 3,
        }
    ],
}


def test_the_newest_value_line_counts_only_the_assistant_chats_updates(tmp_path):
    data = tmp_path / "both.json"
    data.write_text(json.dumps([ASSISTANT_CHAT, PEOPLE_CHAT]), encoding="utf-8")

    out = subprocess.run(
        [sys.executable, str(REPO / "bench" / "locomo.py"), str(data)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"},
    ).stdout

    assert "2 conversations" in out and "2 questions" in out
    # One question about a value that changed; the updated turn outranks the old one.
    assert "newest value (1 questions, updated turn first): hybrid 1.000" in out
    assert "hybrid recall@10 overall: 1.000" in out
    # What the model reads after one recall call with the question's words (the prompt's and more).
    assert re.search(r"^\+recall +all .* 1\.000$", out, re.MULTILINE)


def test_the_prompts_newest_value_reads_standing_instructions_as_their_own_section():
    from bench.locomo import as_read, newest_value
    from lib.memory.types import SearchResult

    def item(message_id: int, standing: bool = False) -> SearchResult:
        return SearchResult(message_id, "...", 1.0, "message", {"standing": True} if standing else {})

    dia_of = {1: "D1:1", 2: "D1:2", 3: "D2:1", 4: "D2:2"}
    speaker_of = {"D1:1": "User", "D1:2": "Assistant", "D2:1": "User", "D2:2": "Assistant"}
    order_of = {"D1:1": 0, "D1:2": 1, "D2:1": 2, "D2:2": 3}
    question = ASSISTANT_CHAT["qa"][0]
    # An older instruction of the user's leads the prompt (its own section), then the update.
    shown = [item(1, standing=True), item(3), item(2)]
    assert as_read(shown, dia_of, {"D2:1"}) == ["D2:1", "D1:2"]
    assert newest_value(question, {"D2:1"}, as_read(shown, dia_of, {"D2:1"}), speaker_of, order_of)
    # Read as one list, the old instruction would count as the old value ranked first.
    listed = [dia_of[r.id] for r in shown]
    assert not newest_value(question, {"D2:1"}, listed, speaker_of, order_of)
    # A standing instruction that is the update itself stays, first.
    assert as_read([item(4), item(3, standing=True)], dia_of, {"D2:1"}) == ["D2:1", "D2:2"]
