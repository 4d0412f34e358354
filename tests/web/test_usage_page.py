"""The web view's usage page: "Highest day: $1.0000" was shown when every day cost $0 (the chart's
scale stood in for the figure). A real database, the page's own numbers."""

from __future__ import annotations

from datetime import UTC, datetime

from lib.web.ui.pages import usage

TODAY = datetime(2026, 11, 27, 12, tzinfo=UTC)


def test_a_month_without_cost_says_its_highest_day_cost_nothing(conn):
    page = usage(conn, today=TODAY)
    assert page["top"] == 0.0
    assert all(day["height"] == 0 for day in page["series"])


def test_the_highest_day_is_the_real_figure_and_the_tallest_bar(conn):
    conn.execute(
        "INSERT INTO usage (created_at, user_id, provider, model, input_tokens, output_tokens, cost_usd) "
        "VALUES ('2026-11-26T10:00:00.000Z', '1', 'anthropic', 'm', 10, 10, 0.25)"
    )
    page = usage(conn, today=TODAY)
    assert page["top"] == 0.25
    tallest = max(page["series"], key=lambda day: day["height"])
    assert tallest["day"] == "2026-11-26" and tallest["height"] > 0
