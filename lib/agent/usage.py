"""Token usage and cost of every LLM call, the per-user daily budget, and totals for `ash usage`.

Days are UTC calendar days (the `created_at` column's date).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import apsw

from lib.config import Config, Settings
from lib.db import immediate, now_iso, one, rows
from lib.llm.types import Usage

INSERT_USAGE_SQL = """
INSERT INTO usage (created_at, user_id, session_id, provider, model, purpose, input_tokens, output_tokens, cost_usd)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
TOKENS_SINCE_SQL = """
SELECT coalesce(sum(input_tokens + output_tokens), 0) AS tokens
FROM usage WHERE user_id = ? AND created_at >= ?
"""
DAILY_TOTALS_SQL = """
SELECT substr(created_at, 1, 10) AS day, coalesce(user_id, '-') AS user_id, count(*) AS calls,
       sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens, sum(cost_usd) AS cost_usd
FROM usage
WHERE created_at >= :since AND (:user_id IS NULL OR user_id = :user_id)
GROUP BY day, user_id
ORDER BY day DESC, user_id
"""


def cost_usd(config: Config, model: str, usage: Usage) -> float:
    """Cost from config.prices (USD per million tokens); a dated model id matches its base name."""
    price = config.prices.get(model)
    if price is None:
        # "claude-sonnet-4-6-20260101" or "gpt-4o-2024-08-06" use the longest matching prefix.
        matches = [name for name in config.prices if model.startswith(name)]
        price = config.prices[max(matches, key=len)] if matches else None
    if price is None:
        return 0.0
    return (usage.input_tokens * price.input + usage.output_tokens * price.output) / 1_000_000


def record_usage(
    conn: apsw.Connection,
    settings: Settings,
    *,
    provider: str,
    model: str,
    usage: Usage,
    user_id: str | None = None,
    session_id: int | None = None,
    purpose: str = "chat",
) -> None:
    """Store one LLM call's tokens and cost."""
    cost = cost_usd(settings.config, model, usage)
    with immediate(conn):
        conn.execute(
            INSERT_USAGE_SQL,
            (
                now_iso(),
                user_id,
                session_id,
                provider,
                model,
                purpose,
                usage.input_tokens,
                usage.output_tokens,
                cost,
            ),
        )


def _day_start(days_ago: int = 0) -> str:
    start = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=days_ago)
    return start.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def tokens_today(conn: apsw.Connection, user_id: str) -> int:
    """Tokens (input + output) the user spent today (UTC)."""
    return int(one(conn, TOKENS_SINCE_SQL, (user_id, _day_start()))["tokens"])


def over_budget(conn: apsw.Connection, settings: Settings, user_id: str) -> bool:
    """True when the user's daily token budget (agent.daily_token_budget, 0 = none) is spent."""
    budget = settings.config.agent.daily_token_budget
    return budget > 0 and tokens_today(conn, user_id) >= budget


def daily_totals(conn: apsw.Connection, *, days: int = 30, user_id: str | None = None) -> list[dict]:
    """Calls, tokens and cost per UTC day and user, newest day first."""
    return rows(conn, DAILY_TOTALS_SQL, {"since": _day_start(max(days - 1, 0)), "user_id": user_id})
