"""`ash memory list|search|add|remove|stats|gc|restore|reindex|history|pending|undo`: knowledge entries
and the search index."""

from __future__ import annotations

import click

from lib.commands.common import open_db, resolve_user, settings_or_exit, user_option


def _line(entry, score: float | None = None) -> str:
    flags = []
    if entry.is_global:
        flags.append("global")
    if entry.superseded_by is not None:
        flags.append(f"superseded by #{entry.superseded_by}")
    if entry.expires_at:
        flags.append(f"until {entry.expires_at[:16].replace('T', ' ')}")
    if entry.status != "active":
        flags.append(entry.status)
    if entry.origin != "user":
        flags.append(f"from {entry.origin}")
    extra = f" [{', '.join(flags)}]" if flags else ""
    lead = f"{score:.3f} " if score is not None else ""
    return f"{lead}#{entry.id} {entry.created_at[:10]} {entry.source} c={entry.confidence:.2f}{extra}  {entry.content}"


@click.group()
def memory() -> None:
    """Knowledge entries and the search index."""


@memory.command("list")
@user_option()
@click.option("--all", "include_inactive", is_flag=True, help="Include superseded and expired entries.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True, help="Most entries listed.")
def memory_list(user_id: str | None, include_inactive: bool, limit: int) -> None:
    """List a user's entries (and global ones), newest first."""
    from lib.memory import knowledge

    settings = settings_or_exit()
    conn = open_db(settings)
    user = resolve_user(settings, user_id)
    entries = knowledge.list_entries(
        conn, owner_user_id=user, include_global=True, include_inactive=include_inactive, limit=limit
    )
    for entry in entries:
        click.echo(_line(entry))
    if not entries:
        click.echo(f"no entries for user {user}")


@memory.command("search")
@click.argument("query")
@user_option()
@click.option("--limit", type=click.IntRange(1, 100), default=10, show_default=True, help="Most results shown.")
def memory_search(query: str, user_id: str | None, limit: int) -> None:
    """Search what a user may see of the knowledge base (hybrid: words and meaning); only entries
    that pass the relevance floor a prompt applies are listed."""
    from lib.memory import knowledge
    from lib.memory.api import search_knowledge

    settings = settings_or_exit()
    conn = open_db(settings)
    user = resolve_user(settings, user_id)
    # The floor a prompt applies (lib/memory/search/relevance.py): fused scores are relative, so
    # without it every search "found" its best entries, unrelated ones with high scores.
    results = search_knowledge(conn, settings, user_id=user, query=query, limit=limit, floor=True)
    shown = 0
    for result in results:
        entry = knowledge.get(conn, result.id)
        if entry is not None:
            click.echo(_line(entry, result.score))
            shown += 1
    if not shown:
        click.echo(f"nothing found for {query!r}: no entry holds a rare word of it or comes close in meaning")


@memory.command("add")
@click.argument("content")
@user_option("Owner's Telegram user id (default: the configured owner).")
@click.option("--global", "is_global", is_flag=True, help="Visible to every user instead of one.")
@click.option("--expires", "expires_at", default=None, help="ISO 8601 date/time, or a span such as 12h, 7d, 2w.")
@click.option("--subject", default=None, help="A short topic key, e.g. 'home city'.")
def memory_add(content: str, user_id: str | None, is_global: bool, expires_at: str | None, subject: str | None) -> None:
    """Store a knowledge entry."""
    from lib.memory import knowledge

    settings = settings_or_exit()
    conn = open_db(settings, create=True)
    owner = None if is_global and not user_id else resolve_user(settings, user_id)
    try:
        memory_id = knowledge.add(
            conn,
            settings,
            content,
            owner_user_id=owner,
            is_global=is_global,
            subject=subject,
            expires_at=expires_at,
            source="cli",
        )
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"added #{memory_id}")


@memory.command("remove")
@click.argument("memory_id", type=int)
def memory_remove(memory_id: int) -> None:
    """Forget an entry for real: it, older versions it replaced, the messages it came from."""
    from lib.memory import forget

    settings = settings_or_exit()
    conn = open_db(settings)
    result = forget.forget_memory(conn, settings, None, memory_id, "cli")
    if result is None:
        raise click.ClickException(f"no memory #{memory_id}; see `ash memory list --all`")
    click.echo(f"removed {result['memories']} entry(ies) and {result['messages']} message(s)")


@memory.command("stats")
@user_option("Only this user's entries (default: everyone's).")
def memory_stats(user_id: str | None) -> None:
    """Counts of entries and the state of the search index."""
    from lib.memory import knowledge
    from lib.memory.api import index_status

    settings = settings_or_exit()
    conn = open_db(settings)
    counts = knowledge.stats(conn, user_id)
    click.echo(f"entries{' of user ' + user_id if user_id else ''}: {counts['total']}")
    for key in ("active", "pending", "discarded", "superseded", "expired", "retired", "global"):
        click.echo(f"  {key}: {counts[key]}")
    for source, n in counts["by_source"].items():
        click.echo(f"  from {source}: {n}")
    status = index_status(conn, settings)
    click.echo(
        f"index: {status['chunks']} chunks, {status['vectors']} vectors ({status['configured_model'] or 'no model'})"
    )
    click.echo(f"  {status['message']}")


@memory.command("gc")
def memory_gc() -> None:
    """Remove expired entries and orphaned index rows; enforce [memory] max_entries; retire
    extracted facts that decayed (`ash memory restore ID` brings one back)."""
    from lib.memory import gc

    settings = settings_or_exit()
    conn = open_db(settings)
    counts = gc.collect(conn, settings, actor="cli")
    click.echo(
        f"expired: {counts['expired']}, evicted: {counts['evicted']}, orphaned index rows: {counts['orphans']}, "
        f"retired: {counts['retired']}, unreviewed (discarded): {counts['unreviewed']}"
    )


@memory.command("restore")
@click.argument("memory_id", type=int)
def memory_restore(memory_id: int) -> None:
    """Bring back an extracted fact that gc retired after it decayed."""
    from lib.memory import decay

    settings = settings_or_exit()
    conn = open_db(settings)
    if not decay.restore(conn, settings, memory_id, actor="cli"):
        raise click.ClickException(f"memory #{memory_id} is not retired; see `ash memory list --all`")
    click.echo(f"restored memory #{memory_id}")


@memory.command("history")
@click.argument("memory_id", type=int)
def memory_history(memory_id: int) -> None:
    """Every recorded change to an entry: who or what made it, and why (also after it was forgotten)."""
    import json

    from lib.memory import audit

    settings = settings_or_exit()
    conn = open_db(settings)
    found = audit.history(conn, memory_id)
    if not found:
        raise click.ClickException(f"no recorded change to memory #{memory_id}")
    for entry in found:
        detail = {k: v for k, v in entry.detail.items() if k != "memory_ids" and v is not None}
        said = json.dumps(detail, sort_keys=True)
        # The audit id is what `ash memory undo` takes.
        click.echo(f"{entry.created_at}  {entry.action:<17} {entry.actor:<24} {said}  [audit #{entry.id}]")


@memory.command("reindex")
def memory_reindex() -> None:
    """Rebuild the search index (chunks, FTS5, vectors) for the configured embedding model.

    Safe beside a running server: its embedding runs at a low CPU priority, so the server's
    questions are answered first (the rebuild takes longer on a busy machine)."""
    from lib.memory.api import reindex_all

    settings = settings_or_exit()
    conn = open_db(settings)
    with click.progressbar(length=1, label="reindexing", show_pos=True) as bar:

        def progress(done: int, total: int) -> None:
            bar.length = max(total, 1)
            bar.update(done - bar.pos)

        total = reindex_all(conn, settings, progress=progress)
    click.echo(f"indexed {total} messages and entries")


def _review_commands() -> None:
    from lib.commands.memory_review import memory_pending, memory_review, memory_undo

    memory.add_command(memory_pending)
    memory.add_command(memory_undo)
    memory.add_command(memory_review)


_review_commands()
