"""`ash doctor`: check what a user would check before trusting the setup (doctor_checks.py)."""

from __future__ import annotations

import click

MARKS = {
    "ok": click.style("ok  ", fg="green"),
    "warn": click.style("warn", fg="yellow"),
    "fail": click.style("FAIL", fg="red"),
}


@click.command()
def doctor() -> None:
    """Check the setup: config, database, file permissions, who is allowed, the bot token and
    webhook with Telegram, one token from each model, embeddings and the Docker sandbox. One line
    per check, each problem with the command that fixes it; creates nothing. Exits 1 on failure."""
    from lib.commands.doctor_checks import run_checks

    results = run_checks()
    for check in results:
        line = f"{MARKS[check.status]} {check.name}: {check.detail}"
        if check.hint and check.status != "ok":
            line += f"\n       -> {check.hint}"
        click.echo(line)
    if any(c.status == "fail" for c in results):
        raise SystemExit(1)
