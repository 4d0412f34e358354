"""`ash usage`: LLM tokens and cost per day and user."""

from __future__ import annotations

import click

from lib.commands.common import open_db, settings_or_exit, user_option


@click.command()
@click.option("--days", type=click.IntRange(min=1), default=30, show_default=True, help="How many days back.")
@user_option("Only this user id.")
def usage(days: int, user_id: str | None) -> None:
    """Show LLM calls, input and output tokens and cost per day (UTC) and user."""
    from lib.agent import daily_totals

    settings = settings_or_exit()
    conn = open_db(settings)
    try:
        found = daily_totals(conn, days=days, user_id=user_id)
    finally:
        conn.close()
    if not found:
        click.echo(f"No LLM usage recorded in the last {days} days.")
        return
    header = f"{'day':<10}  {'user':<14}  {'calls':>6}  {'input':>10}  {'output':>10}  {'cost USD':>10}"
    click.echo(header)
    for row in found:
        click.echo(
            f"{row['day']:<10}  {row['user_id']:<14}  {row['calls']:>6}  {row['input_tokens']:>10}  "
            f"{row['output_tokens']:>10}  {row['cost_usd']:>10.4f}"
        )
    total_in = sum(r["input_tokens"] for r in found)
    total_out = sum(r["output_tokens"] for r in found)
    total_cost = sum(r["cost_usd"] for r in found)
    calls = sum(r["calls"] for r in found)
    click.echo(f"{'total':<10}  {'':<14}  {calls:>6}  {total_in:>10}  {total_out:>10}  {total_cost:>10.4f}")
