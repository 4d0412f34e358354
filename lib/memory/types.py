"""Types memory hands to the agent."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class SearchResult:
    """One retrieved item: a past message or a knowledge entry."""

    id: int
    content: str
    score: float
    source_type: str  # "message" or "knowledge"
    metadata: dict = field(default_factory=dict)
    token_count: int = 0
