"""Turns parked on a risky tool call: stored so a button press can resume them (table pending_actions).

A chat's updates run one at a time (lib/inbox/worker.py), so a turn waiting in place for a
press in the same chat would wait for ever: the press is queued behind it. The turn is stored
instead, with everything needed to go on (its input, system prompt, the messages so far, the
calls of the step not yet run), and ends; the press is an update of its own that resumes it.
A decision is taken once: the status moves from 'pending' in one UPDATE, whoever races.
"""

from __future__ import annotations

import base64
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import apsw
import msgspec

from lib.agent.contract import Image, TurnInput
from lib.db import immediate, now_iso
from lib.llm.types import ImageBlock, Message, TextBlock, ToolResultBlock, ToolUseBlock

PENDING = "pending"
DECIDED = ("approved", "denied", "expired", "superseded")


@dataclass
class TurnState:
    """Everything a turn needs to go on after its last model call."""

    turn: TurnInput
    session_id: int
    system: str
    preset: str | None
    messages: list[Message]
    step: int  # model calls made
    done: list[str]  # text of finished steps
    outside: list[str]  # outside content in the context so far (lib/agent/approval.py)
    own_words: str  # what the person wrote themselves
    uses: list[ToolUseBlock]  # this step's calls not run yet; the first is the one waiting
    results: list[ToolResultBlock]  # this step's results so far
    tool_calls: list[str] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    # What the prompt drew on (lib/memory/provenance.py): linked to the answer once it is stored.
    sources_id: int | None = None
    # Past messages the model already reads (lib/tools/base.py ToolContext.seen_messages).
    seen_messages: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class PendingAction:
    id: int
    provider: str
    chat_id: str
    user_id: str
    tool_name: str
    tool_input: dict
    reason: str
    status: str
    expires_at: float
    prompt_message_id: int | None
    # None once decided: the turn's state is dropped then (see `decide`).
    state: TurnState | None

    @property
    def undecided(self) -> bool:
        """Still waiting for Run / Deny (or the timeout)."""
        return self.status == PENDING


# -- the state as JSON ----------------------------------------------------------------------
def _block(block: Any) -> dict:
    if isinstance(block, ImageBlock):
        return {"type": "image", "data": base64.b64encode(block.data).decode(), "media_type": block.media_type}
    kind = {TextBlock: "text", ToolUseBlock: "tool_use", ToolResultBlock: "tool_result"}[type(block)]
    return {"type": kind, **asdict(block)}


def _unblock(data: dict) -> Any:
    kind = data.pop("type")
    if kind == "image":
        return ImageBlock(base64.b64decode(data["data"]), data["media_type"])
    return {"text": TextBlock, "tool_use": ToolUseBlock, "tool_result": ToolResultBlock}[kind](**data)


def encode_state(state: TurnState) -> bytes:
    turn = asdict(state.turn)
    turn["images"] = [
        {"data": base64.b64encode(image.data).decode(), "media_type": image.media_type} for image in state.turn.images
    ]
    return msgspec.json.encode(
        {
            **{k: v for k, v in asdict(state).items() if k not in ("turn", "messages", "uses", "results")},
            "turn": turn,
            "messages": [{"role": m.role, "content": [_block(b) for b in m.content]} for m in state.messages],
            "uses": [_block(u) for u in state.uses],
            "results": [_block(r) for r in state.results],
        }
    )


def decode_state(raw: bytes | str) -> TurnState:
    data = msgspec.json.decode(raw)
    turn = data.pop("turn")
    turn["images"] = tuple(Image(base64.b64decode(i["data"]), i["media_type"]) for i in turn["images"])
    turn["untrusted"] = tuple(turn.get("untrusted") or ())
    messages = [Message(m["role"], tuple(_unblock(b) for b in m["content"])) for m in data.pop("messages")]
    uses = [_unblock(u) for u in data.pop("uses")]
    results = [_unblock(r) for r in data.pop("results")]
    return TurnState(turn=TurnInput(**turn), messages=messages, uses=uses, results=results, **data)


# -- the table ------------------------------------------------------------------------------
INSERT_SQL = """
INSERT INTO pending_actions (provider, chat_id, user_id, tool_name, tool_input, reason, state, created_at, expires_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id
"""
SELECT_SQL = """
SELECT id, provider, chat_id, user_id, tool_name, tool_input, reason, status, expires_at, prompt_message_id, state
FROM pending_actions
"""
DECIDE_SQL = """
UPDATE pending_actions SET status = ?, decided_at = ?, decided_by = ?, state = ?
WHERE id = ? AND status = 'pending'
"""


def park(conn: apsw.Connection, state: TurnState, *, reason: str, timeout: float, now: float | None = None) -> int:
    """Store a turn waiting on its first remaining call; returns the action's id."""
    use = state.uses[0]
    turn = state.turn
    row = conn.execute(
        INSERT_SQL,
        (
            turn.provider,
            turn.chat_id,
            turn.user_id,
            use.name,
            msgspec.json.encode(use.input).decode(),
            reason,
            encode_state(state).decode(),
            now_iso(),
            (time.time() if now is None else now) + timeout,
        ),
    ).fetchone()
    return row[0]


def _action(row: Any) -> PendingAction:
    (id_, provider, chat_id, user_id, tool, tool_input, reason, status, expires_at, prompt_id, state) = row
    return PendingAction(
        id_,
        provider,
        chat_id,
        user_id,
        tool,
        msgspec.json.decode(tool_input),
        reason,
        status,
        expires_at,
        prompt_id,
        decode_state(state) if status == PENDING else None,
    )


def get_action(conn: apsw.Connection, action_id: int) -> PendingAction | None:
    """The action, decided or not; None when there is no such id."""
    row = conn.execute(SELECT_SQL + " WHERE id = ?", (action_id,)).fetchone()
    return _action(row) if row else None


def mark_shown(conn: apsw.Connection, action_id: int, message_id: int) -> None:
    """Remember which message carries the buttons (so they can be taken away later)."""
    conn.execute("UPDATE pending_actions SET prompt_message_id = ? WHERE id = ?", (message_id, action_id))


def decide(conn: apsw.Connection, action_id: int, status: str, by: str | None) -> PendingAction | None:
    """Take the decision on a pending action once: returns it when this call decided, None when
    it was decided before (a second press, a press racing the timeout)."""
    assert status in DECIDED
    with immediate(conn):
        action = get_action(conn, action_id)
        if action is None or action.status != PENDING:
            return None
        # The stored state is dropped from the row once decided: it may hold a document's text
        # or a web page, and the decision is what is kept.
        conn.execute(DECIDE_SQL, (status, now_iso(), by, "{}", action_id))
    return action


def open_actions(conn: apsw.Connection, provider: str, chat_id: str, user_id: str) -> list[int]:
    """The person's actions still waiting in this chat."""
    sql = "SELECT id FROM pending_actions WHERE provider = ? AND chat_id = ? AND user_id = ? AND status = 'pending'"
    return [r[0] for r in conn.execute(sql, (provider, chat_id, user_id))]


def expired_actions(conn: apsw.Connection, now: float | None = None) -> list[int]:
    """Actions whose time to answer is over."""
    sql = "SELECT id FROM pending_actions WHERE status = 'pending' AND expires_at <= ? ORDER BY expires_at"
    return [r[0] for r in conn.execute(sql, (time.time() if now is None else now,))]


def any_action_expired(conn: apsw.Connection, now: float | None = None) -> bool:
    """Whether any action's time to answer is over (one indexed lookup)."""
    sql = "SELECT 1 FROM pending_actions WHERE status = 'pending' AND expires_at <= ? LIMIT 1"
    return conn.execute(sql, (time.time() if now is None else now,)).fetchone() is not None
