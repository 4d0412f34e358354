"""The agent: one turn of the assistant, and the calls a channel makes around it.

This is the package's face: channels (Telegram, `ash chat`), the server's wiring and the CLI
import these names from `lib.agent` and nothing from its modules (the `agent-face` contract in
pyproject.toml). The contract types load at once (dataclasses and protocols, nothing else);
everything else loads on first use, so importing the face costs the server's cold start
nothing: the turn brings the model clients, the tools and the memory index with it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from lib.agent.contract import (
    ApprovalRequest,
    Approvals,
    Image,
    OutputSink,
    SourcesShown,
    ToolWatcher,
    TurnInput,
    TurnResult,
)

if TYPE_CHECKING:
    from lib.agent.models import complete_text, warm_models
    from lib.agent.pending import (
        PendingAction,
        any_action_expired,
        expired_actions,
        get_action,
        mark_shown,
        open_actions,
    )
    from lib.agent.presets import move_pick, pick_preset, picked_preset
    from lib.agent.prompt import speaker_name
    from lib.agent.resume import close_unanswered, resume_turn
    from lib.agent.steps import show_call
    from lib.agent.turn import run_turn
    from lib.agent.usage import daily_totals, over_budget

# Name -> the module of this package that defines it, imported when the name is first asked for.
LAZY = {
    # Running a turn, and going on with one parked on a risky call.
    "run_turn": "turn",
    "resume_turn": "resume",
    "close_unanswered": "resume",
    "show_call": "steps",
    # Parked calls waiting for Run / Deny (the channel shows and settles the question).
    "PendingAction": "pending",
    "get_action": "pending",
    "mark_shown": "pending",
    "open_actions": "pending",
    "expired_actions": "pending",
    "any_action_expired": "pending",
    # A chat's /model pick.
    "pick_preset": "presets",
    "picked_preset": "presets",
    "move_pick": "presets",
    # How a group message names its writer.
    "speaker_name": "prompt",
    # Tokens: the daily budget and the usage report.
    "over_budget": "usage",
    "daily_totals": "usage",
    # The model clients: built ahead of the first turn, and text for memory's own requests.
    "warm_models": "models",
    "complete_text": "models",
}

__all__ = [
    "ApprovalRequest",
    "Approvals",
    "Image",
    "OutputSink",
    "PendingAction",
    "SourcesShown",
    "ToolWatcher",
    "TurnInput",
    "TurnResult",
    "any_action_expired",
    "close_unanswered",
    "complete_text",
    "daily_totals",
    "expired_actions",
    "get_action",
    "mark_shown",
    "move_pick",
    "open_actions",
    "over_budget",
    "pick_preset",
    "picked_preset",
    "resume_turn",
    "run_turn",
    "show_call",
    "speaker_name",
    "warm_models",
]


def __getattr__(name: str) -> Any:
    """Load the module behind a lazy name on first use (PEP 562)."""
    module = LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
