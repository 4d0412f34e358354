"""The agent's memory tools: `remember`, `recall` and `forget`, always scoped to the chat's memory.

The owner comes from the tool context (who is talking, and where), never from the model's
arguments: in a private chat it is the person's own memory, in a group the group's
(lib/memory/scope.py). So no one can read or delete another person's memory through these
tools, and what is remembered in a group stays with the group, whoever's turn it was.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, ClassVar

import msgspec

from lib.config import Settings
from lib.memory import screen
from lib.tools.base import ToolContext, ToolResult

RECALL_LIMIT = 8
ALREADY_SEEN = (
    "Nothing more in memory for that: what matches ({count}) is already in this conversation or its memory section."
)
PENDING_NOTE = (
    "Saved for review, not remembered yet (memory #{id}): this conversation holds outside content, so "
    "the person keeps or discards it with /memory pending. It is not used until they keep it."
)


def _db_and_settings(context: ToolContext) -> tuple[Any, Settings]:
    return context.db, context.settings


class Remember:
    """Store a fact or note for the user."""

    name: ClassVar[str] = "remember"
    description: ClassVar[str] = (
        "Save a fact, preference or note about the user to long-term memory so it can be recalled in later "
        "conversations. Use when the user asks you to remember something or states something lasting about "
        "themselves. Optionally give expires_at for things that stop being true (ISO 8601 like 2026-05-01 or "
        "2026-05-01T18:00Z, or a span like 12h, 7d, 2w)."
    )

    class Input(msgspec.Struct, forbid_unknown_fields=True):
        content: Annotated[str, msgspec.Meta(min_length=1, description="The fact or note, as one sentence.")]
        expires_at: Annotated[
            str | None, msgspec.Meta(description="When it stops being true: ISO 8601 or a span such as 7d.")
        ] = None

    async def execute(self, args: Remember.Input, context: ToolContext) -> ToolResult:
        """Store the entry for the asking user: pending review while the turn holds outside content."""
        from lib.memory import reinforce, review

        db, settings = _db_and_settings(context)
        # What the person said in their own words is theirs, whatever else the turn holds.
        outside = bool(context.outside) and not review.in_own_words(args.content, context.own_words)

        def add() -> reinforce.Saved:
            # Saying it again strengthens the entry that holds it rather than adding a copy.
            return reinforce.save(
                db.conn(),
                settings,
                args.content,
                owner_user_id=context.memory,
                expires_at=args.expires_at,
                source="tool",
                actor="tool:remember",
                because={"asked_by": context.user_id, "session_id": context.session_id},
                origin=review.origin_of(context.outside) if outside else context.origin,
                status="pending" if outside else "active",
            )

        try:
            saved = await asyncio.to_thread(add)
        except ValueError as exc:
            return ToolResult(output=str(exc), is_error=True)
        if saved.status == "pending":
            return ToolResult(output=PENDING_NOTE.format(id=saved.id), metadata={"memory_id": saved.id})
        said = "Already remembered; reinforced" if saved.reinforced else "Remembered"
        if outside and not saved.reinforced:
            said = "Already remembered"
        return ToolResult(output=f"{said} (memory #{saved.id}).", metadata={"memory_id": saved.id})


class Recall:
    """Search the user's memory."""

    name: ClassVar[str] = "recall"
    description: ClassVar[str] = (
        "Search the user's long-term memory (saved facts and past conversations) by meaning and by words. "
        "Returns matching entries with their ids; use an id with `forget` to delete one. Past messages you "
        "already have (this conversation, the memory section, earlier recall results) are left out, so each "
        "call brings new ones. For a question that gathers things from many conversations (every trip, each "
        "change, in what order, how many times), search once for each part, in the words those conversations "
        "would use rather than the question's."
    )

    class Input(msgspec.Struct, forbid_unknown_fields=True):
        query: Annotated[str, msgspec.Meta(min_length=1, description="What to look for, in a few words.")]

    async def execute(self, args: Recall.Input, context: ToolContext) -> ToolResult:
        """Search what the asking user may see."""
        from lib.memory.api import recall

        db, settings = _db_and_settings(context)
        seen = context.seen_messages

        def search() -> tuple[list, int]:
            return recall(db.conn(), settings, user_id=context.memory, query=args.query, seen=seen, limit=RECALL_LIMIT)

        def unconfirmed() -> list:
            from lib.memory import review

            return review.pending_matching(db.conn(), context.memory, args.query)

        results, already = await asyncio.to_thread(search)
        waiting = await asyncio.to_thread(unconfirmed)
        if not results and not waiting:
            if already:
                said = f"{already} past message{'s' if already > 1 else ''}"
                return ToolResult(output=ALREADY_SEEN.format(count=said))
            return ToolResult(output="Nothing found in memory for that.")
        lines = []
        for r in results:
            when = str(r.metadata.get("created_at", ""))[:10]
            label = f"memory #{r.id}" if r.source_type == "knowledge" else f"message from {when or 'earlier'}"
            lines.append(f"- [{label}] {screen.as_retrieved(r, context.speaker)}")
        # Asked for explicitly, a pending entry may be shown, never as something Ash knows.
        lines += [f"- [memory #{e.id}, unconfirmed: pending review, from {e.origin}] {e.content}" for e in waiting]
        # A document's text is someone else's words: the turn then holds outside content.
        untrusted = bool(waiting) or any(r.metadata.get("untrusted") for r in results)
        messages = [r.id for r in results if r.source_type == "message"]
        return ToolResult(
            output="\n".join(lines),
            metadata={
                "ids": [r.id for r in results],
                "messages": messages,
                # What /why lists for the answer besides the prompt's items (lib/memory/provenance.py).
                "found": [(r.source_type, r.id, r.score) for r in results],
                "untrusted": untrusted,
            },
        )


class Forget:
    """Delete one of the user's memories."""

    name: ClassVar[str] = "forget"
    description: ClassVar[str] = (
        "Permanently delete one of the user's saved memories, together with the messages it came from. Give "
        "the memory id from `recall` (preferred) or a query describing it; the best match is deleted."
    )

    class Input(msgspec.Struct, forbid_unknown_fields=True):
        id: Annotated[int | None, msgspec.Meta(description="The memory id, as shown by recall.")] = None
        query: Annotated[str | None, msgspec.Meta(description="Words describing the memory to delete.")] = None

    async def execute(self, args: Forget.Input, context: ToolContext) -> ToolResult:
        """Forget one entry of the asking user (the owner may also forget global entries)."""
        from lib.memory import forget

        target = args.id if args.id is not None else (args.query or "").strip()
        if target == "":
            return ToolResult(output="Give the memory id or a query describing it.", is_error=True)
        db, settings = _db_and_settings(context)

        def run() -> dict | None:
            return forget.forget_memory(
                db.conn(), settings, context.memory, target, f"user:{context.user_id}", include_global=context.is_owner
            )

        result = await asyncio.to_thread(run)
        if result is None:
            return ToolResult(output="No matching memory of this user was found; nothing was deleted.", is_error=True)
        ids = ", ".join(f"#{i}" for i in result["memory_ids"])
        return ToolResult(
            output=f"Forgot memory {ids} and {result['messages']} message(s) it came from.", metadata=result
        )


TOOLS = [Remember(), Recall(), Forget()]
