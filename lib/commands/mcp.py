"""`ash mcp serve|token`: Ash's memory as an MCP server for a person's other agents."""

from __future__ import annotations

import click

from lib.commands.common import open_db, settings_or_exit, user_option


@click.group()
def mcp() -> None:
    """Ash's memory as an MCP server: /mcp over HTTP (with a token) or stdio."""


@mcp.command("serve")
@user_option("Telegram user id whose memory to serve.", required=True)
@click.option("--read-only", is_flag=True, help="Offer only the reading tools.")
def serve(user_id: str, read_only: bool) -> None:
    """Serve one person's memory over stdin/stdout (for a local MCP client)."""
    import anyio

    from lib.mcp.stdio import serve_stdio

    settings = settings_or_exit()
    open_db(settings).close()  # migrate first, so the server never meets an old schema
    anyio.run(lambda: serve_stdio(settings, user_id, read_only=read_only))


@mcp.group()
def token() -> None:
    """Bearer tokens for /mcp: create, list, revoke."""


@token.command("create")
@user_option("Telegram user id the token acts for.", required=True)
@click.option("--name", default=None, help="A name for the client (audit log, token list).")
@click.option("--read-only", is_flag=True, help="Only the reading tools (recall, list, search, export).")
@click.option("--expires", "expires_days", type=click.FloatRange(min=0, min_open=True), help="Days until it expires.")
def token_create(user_id: str, name: str | None, read_only: bool, expires_days: float | None) -> None:
    """Make a token; it is printed once, alone on the last line, and never stored."""
    from lib.mcp import tokens

    settings = settings_or_exit()
    conn = open_db(settings, create=True)
    text, token_id = tokens.create(
        conn, user_id, name=name or f"token-{user_id}", read_only=read_only, expires_days=expires_days
    )
    kind = "read-only " if read_only else ""
    until = f", expires in {expires_days:g} days" if expires_days else ""
    click.echo(f"{kind}token #{token_id} for user {user_id}{until}. It is shown only now:", err=True)
    click.echo(text)


@token.command("list")
def token_list() -> None:
    """Every token made (never their text), revoked and expired ones included."""
    from lib.mcp import tokens

    conn = open_db(settings_or_exit())
    found = tokens.list_tokens(conn)
    for t in found:
        state = f"revoked {t['revoked_at'][:16]}" if t["revoked_at"] else "active"
        extra = [state, "read-only" if t["read_only"] else "read-write"]
        if t["expires_at"]:
            extra.append(f"expires {t['expires_at'][:16]}")
        if t["last_used_at"]:
            extra.append(f"last used {t['last_used_at'][:16]}")
        click.echo(f"#{t['id']} {t['name']} (user {t['user_id']}): {', '.join(extra)}")
    if not found:
        click.echo("no tokens: MCP is not enabled")


@token.command("revoke")
@click.argument("token_id", type=int)
def token_revoke(token_id: int) -> None:
    """Revoke a token by its number (see `ash mcp token list`); it stops working at once."""
    from lib.mcp import tokens

    conn = open_db(settings_or_exit())
    if not tokens.revoke(conn, token_id):
        raise click.ClickException(f"no live token #{token_id}; see `ash mcp token list`")
    click.echo(f"revoked token #{token_id}")
