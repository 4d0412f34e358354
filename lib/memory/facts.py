"""Reading the extraction model's answers (lib/memory/extraction.py): the facts it proposes and the
older facts it says a new one replaces; `first_json` also reads consolidation's answers
(lib/memory/consolidate_model.py). Anything malformed is skipped, never raised."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

__all__ = ["Fact", "first_json", "parse_facts", "parse_superseded"]


@dataclass
class Fact:
    """A fact the model proposed."""

    content: str
    confidence: float
    subject: str | None = None
    message_id: int | None = None
    # The outside content the turn of its message held: such a fact waits for review.
    outside: list[str] = field(default_factory=list)


def first_json(text: str) -> dict | list | None:
    """The first JSON object or array in a model answer (code fences and prose around it allowed)."""
    text = re.sub(r"```(?:json)?", "", text or "")
    decoder = json.JSONDecoder()
    for match in re.finditer(r"[\[{]", text):
        try:
            value, _ = decoder.raw_decode(text[match.start() :])
        except ValueError:
            continue
        return value
    return None


def parse_facts(text: str) -> list[Fact]:
    """Facts from the model's answer; anything malformed is skipped, never raised."""
    value = first_json(text)
    items = value.get("facts", []) if isinstance(value, dict) else value if isinstance(value, list) else []
    facts = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        content = item.get("content")
        try:
            confidence = float(item.get("confidence", 0))
        except (TypeError, ValueError):
            continue
        if not isinstance(content, str) or not content.strip() or not 0 <= confidence <= 1:
            continue
        subject = item.get("subject")
        message_id = item.get("message_id")
        facts.append(
            Fact(
                content=content.strip(),
                confidence=confidence,
                subject=subject.strip() if isinstance(subject, str) and subject.strip() else None,
                message_id=message_id if isinstance(message_id, int) else None,
            )
        )
    return facts


def parse_superseded(text: str, allowed: set[int]) -> list[int]:
    """Ids from the check answer that were among the candidates offered."""
    value = first_json(text)
    ids = value.get("supersedes", []) if isinstance(value, dict) else value if isinstance(value, list) else []
    if not isinstance(ids, list):
        return []
    found = []
    for item in ids:
        candidate = int(item) if isinstance(item, int | str) and str(item).strip().lstrip("#").isdigit() else None
        if candidate in allowed and candidate not in found:
            found.append(candidate)
    return found
