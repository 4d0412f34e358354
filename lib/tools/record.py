"""Every tool run recorded in tool_executions: input, output (truncated), exit code, success, duration."""

from __future__ import annotations

import json
from typing import Any

import apsw

from lib.db import immediate, now_iso
from lib.tools.base import ToolContext, ToolResult

# Enough to see what happened; the full output already went to the model.
OUTPUT_LIMIT = 8000

INSERT_TOOL_RUN_SQL = """
INSERT INTO tool_executions
    (session_id, user_id, chat_id, tool_name, input, output, exit_code, success, duration_ms, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""


def truncate(text: str, limit: int = OUTPUT_LIMIT) -> str:
    """`text` cut to `limit` characters, keeping head and tail and saying how much was left out."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters left out ...]\n{text[-half:]}"


def record_tool_run(
    conn: apsw.Connection,
    context: ToolContext,
    *,
    tool_name: str,
    tool_input: dict[str, Any],
    result: ToolResult,
    duration_ms: int,
) -> int:
    """Store one tool run; returns its row id."""
    with immediate(conn):
        conn.execute(
            INSERT_TOOL_RUN_SQL,
            (
                context.session_id,
                context.user_id,
                context.chat_id,
                tool_name,
                json.dumps(tool_input, ensure_ascii=False, default=str),
                truncate(result.output),
                result.exit_code,
                0 if result.is_error else 1,
                duration_ms,
                now_iso(),
            ),
        )
        return conn.last_insert_rowid()
