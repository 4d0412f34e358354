"""What a `recall` call leaves in its turn (lib/agent/steps.py calls it after each one).

The past messages it showed the model join those the turn's model already reads, so the next
call brings others (lib/memory/api.py recall); what it found joins what `/why` lists for the
answer (lib/memory/provenance.py), and the 🧠 button's count follows.
"""

from __future__ import annotations

import asyncio
import logging

from lib.agent.contract import OutputSink, SourcesShown
from lib.agent.pending import TurnState
from lib.memory import provenance
from lib.runtime import Runtime
from lib.tools.base import ToolResult

log = logging.getLogger("ash.agent")


async def after_recall(runtime: Runtime, sink: OutputSink, state: TurnState, outcome: ToolResult) -> None:
    """Mark what the call showed as seen, and record what it found for /why."""
    shown = outcome.metadata.get("messages") or ()
    state.seen_messages += [i for i in shown if i not in state.seen_messages]
    found = [tuple(f) for f in outcome.metadata.get("found") or ()]
    if state.sources_id is None or not found:
        return
    answer_id = state.sources_id
    try:
        count = await asyncio.to_thread(lambda: provenance.add_found(runtime.db.conn(), answer_id, found))
    except Exception:
        # /why is a help: the answer goes on without these items in it.
        log.warning("could not record what recall found for /why", exc_info=True)
        return
    if isinstance(sink, SourcesShown):
        sink.sources(answer_id, count)
