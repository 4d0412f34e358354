"""`ash chat` asks y/N before a risky tool call (lib/agent/approval.py): the terminal can wait in
place, unlike a Telegram chat whose button press is queued behind the waiting turn."""

from __future__ import annotations

import asyncio
import sys

from lib.agent import ApprovalRequest, show_call

QUESTION = "Ash wants to run this, and it needs your OK first ({reason}):\n\n{call}"
NO_TERMINAL = "(Not run: there is no terminal to ask you at. Run `ash chat` in a terminal to answer y/N.)"


def question(request: ApprovalRequest) -> str:
    """The exact call and why it waits, as Markdown."""
    return QUESTION.format(reason=request.reason, call=show_call(request.tool_name, request.tool_input))


async def ask_yes_no(prompt: str = "Run it? [y/N] ") -> bool:
    """Read one answer from the terminal (off the event loop); anything but y/yes is No."""
    if not sys.stdin.isatty():
        return False
    try:
        answer = await asyncio.to_thread(input, prompt)
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")
