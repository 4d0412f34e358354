"""`ash doctor`'s lines for outside MCP servers: each one started, and the tools it offers."""

from __future__ import annotations

from lib.commands.doctor_result import Check
from lib.config import Settings


def mcp_checks(settings: Settings) -> list[Check]:
    """One line per `[mcp.servers.NAME]`: its tools as the model sees them, or why it failed."""
    if not settings.config.mcp.servers:
        return []
    from lib.tools.mcp_client import SEPARATOR, api_names, close_sessions, discover

    checks = []
    try:
        found = discover(settings)
    finally:
        close_sessions()  # the servers were started only to be asked
    for listed in found:
        name = f"mcp server {listed.server}"
        if listed.error is not None:
            hint = "check its command/url in config.toml and that every ${VAR} it names is set"
            checks.append(Check(name, "warn", f"not started, skipped: {listed.error}", hint))
            continue
        aliases = api_names(listed.server, [t.name for t in listed.tools])
        plain = {tool: f"{listed.server}{SEPARATOR}{tool}" for tool in aliases}
        shown = [alias if alias == plain[tool] else f"{alias} ({tool})" for tool, alias in aliases.items()]
        tools = ", ".join(shown) or "no tools"
        checks.append(Check(name, "ok", f"{len(listed.tools)} tool(s): {tools}"))
    return checks
