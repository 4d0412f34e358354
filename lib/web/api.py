"""Response shapes more than one admin route returns (handlers never import each other)."""

from __future__ import annotations

import msgspec

from lib.memory import knowledge


class MemoryOut(msgspec.Struct):
    """A knowledge entry; `score` is set for search results."""

    id: int
    content: str
    source: str
    owner_user_id: str | None
    is_global: bool
    subject: str | None
    confidence: float
    created_at: str
    expires_at: str | None
    superseded_by: int | None
    superseded_at: str | None
    source_message_id: int | None
    active: bool
    score: float | None = None


def memory_out(entry: knowledge.Knowledge, score: float | None = None) -> MemoryOut:
    """The API shape of an entry."""
    return MemoryOut(
        id=entry.id,
        content=entry.content,
        source=entry.source,
        owner_user_id=entry.owner_user_id,
        is_global=entry.is_global,
        subject=entry.subject,
        confidence=entry.confidence,
        created_at=entry.created_at,
        expires_at=entry.expires_at,
        superseded_by=entry.superseded_by,
        superseded_at=entry.superseded_at,
        source_message_id=entry.source_message_id,
        active=entry.is_active(),
        score=score,
    )
