"""`ash memory pending` and `ash memory undo`: review what outside content wrote, and take back one
audited change (lib/memory/review.py, lib/memory/undo.py)."""

from __future__ import annotations

import click

from lib.commands.common import open_db, settings_or_exit


@click.command("pending")
@click.option(
    "--owner", "user_id", default=None, help="Only this memory owner's entries: a user id, or chat:ID for a group."
)
@click.option("--keep", "keep_id", type=int, default=None, help="Keep this pending entry: it becomes active.")
@click.option("--discard", "discard_id", type=int, default=None, help="Discard this pending entry.")
def memory_pending(user_id: str | None, keep_id: int | None, discard_id: int | None) -> None:
    """Memories written while a conversation held outside content, waiting for review; keep or
    discard one. Pending entries never reach a prompt until kept."""
    from lib.memory import review

    if keep_id is not None and discard_id is not None:
        raise click.UsageError("give --keep or --discard, not both")
    settings = settings_or_exit()
    conn = open_db(settings)
    if keep_id is not None or discard_id is not None:
        target = keep_id if keep_id is not None else discard_id
        decide = review.keep if keep_id is not None else review.discard
        entry = decide(conn, settings, target, actor="cli")
        if entry is None:
            raise click.ClickException(f"memory #{target} is not pending; see `ash memory pending`")
        click.echo(
            f"{'kept' if keep_id is not None else 'discarded'} memory #{target} (audit: ash memory history {target})"
        )
        return
    entries = review.pending(conn, user_id, limit=500)
    for entry in entries:
        owner = "global" if entry.is_global else entry.owner_user_id
        click.echo(f"#{entry.id} {entry.created_at[:10]} {owner} from {entry.origin}  {entry.content}")
    if not entries:
        click.echo("nothing waits for review")


@click.command("undo")
@click.argument("audit_id", type=int)
def memory_undo(audit_id: int) -> None:
    """Take back one audited change to memory (an add, a supersession, a keep or discard, a
    reinforcement, a retirement), restoring the entries and their search index; audited itself.
    Find the id with `ash memory history MEMORY_ID` or GET /admin/audit."""
    from lib.memory import undo

    settings = settings_or_exit()
    conn = open_db(settings)
    done = undo.undo(conn, settings, audit_id, actor="cli")
    if not done.ok:
        raise click.ClickException(done.message)
    click.echo(done.message)


@click.command("review")
@click.option(
    "--owner", "user_id", default=None, help="Only this memory owner's proposals: a user id, or chat:ID for a group."
)
@click.option("--apply", "apply_id", type=int, default=None, help="Apply this proposal.")
@click.option("--skip", "skip_id", type=int, default=None, help="Skip this proposal (it is not proposed again).")
@click.option("--apply-all", is_flag=True, help="Apply every open proposal.")
@click.option(
    "--scan",
    is_flag=True,
    help="Look for duplicates now (contradicted and stale facts wait for the server's daily pass).",
)
def memory_review(user_id: str | None, apply_id: int | None, skip_id: int | None, apply_all: bool, scan: bool) -> None:
    """Consolidation's proposals: duplicate facts to merge, contradicted facts a newer one replaces,
    stale facts to expire. Under [memory] consolidate = "propose" nothing changes until a proposal
    is applied here (or under /memory pending)."""
    from lib.memory import consolidate

    settings = settings_or_exit()
    conn = open_db(settings)
    if scan:
        counts = consolidate.propose(conn, settings)
        click.echo(f"proposed: {counts['proposed']}, applied: {counts['applied']}")
    chosen = [p["id"] for p in consolidate.open_proposals(conn, user_id)] if apply_all else []
    chosen += [apply_id] if apply_id is not None else []
    for proposal_id in chosen:
        why_not = consolidate.apply(conn, settings, proposal_id, actor="cli")
        if why_not is not None:
            raise click.ClickException(why_not)
        click.echo(f"applied proposal #{proposal_id}")
    if skip_id is not None:
        if not consolidate.skip(conn, skip_id):
            raise click.ClickException(f"proposal #{skip_id} is not open")
        click.echo(f"skipped proposal #{skip_id}")
    if chosen or skip_id is not None:
        return
    proposals = consolidate.open_proposals(conn, user_id)
    for proposal in proposals:
        head, *entries = consolidate.describe(conn, proposal)
        click.echo(f"#{proposal['id']} {proposal['owner_user_id'] or 'global'}: {head}")
        for line in entries:
            click.echo(f"    {line}")
    if not proposals:
        click.echo("no proposals wait for review")
