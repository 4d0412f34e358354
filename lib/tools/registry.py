"""The tools offered to the model: memory tools, bash in the sandbox, web search (with its key), web fetch.

Imported by the agent on a turn's first use, so the server's cold start pays for none of them.
Bash is offered per `[sandbox] enabled`; with "auto" only while a Docker engine answers (asked at
most every 30 s, lib/sandbox/availability.py).
"""

from __future__ import annotations

from lib.config import Settings
from lib.llm.types import ToolSpec
from lib.sandbox.availability import sandbox_enabled
from lib.tools import web_fetch, web_search
from lib.tools.base import Tool, input_schema
from lib.tools.bash import BashTool
from lib.tools.memory_tools import TOOLS as MEMORY_TOOLS
from lib.tools.schedule_tools import TOOLS as SCHEDULE_TOOLS
from lib.tools.timezone_tool import SetTimezone


def available_tools(settings: Settings) -> list[Tool]:
    """Every tool enabled for this configuration, in a stable order."""
    tools: list[Tool] = [*MEMORY_TOOLS, SetTimezone(), *SCHEDULE_TOOLS]
    if sandbox_enabled(settings.config.sandbox):
        tools.append(BashTool())
    if web_search.enabled(settings):
        tools.append(web_search.WebSearchTool())
    if web_fetch.enabled(settings):
        tools.append(web_fetch.WebFetchTool())
    if settings.config.mcp.servers:
        from lib.tools.mcp_client import mcp_tools

        tools.extend(mcp_tools(settings))
    return tools


def warm_schemas() -> None:
    """Build every built-in tool's input schema once (cached by input_schema): built at a turn,
    msgspec's schema generation held the event loop 80 ms (seen in the soak). Runs on the
    server's warm-up thread; asks nothing of Docker or the network."""
    tools = [*MEMORY_TOOLS, SetTimezone(), *SCHEDULE_TOOLS, BashTool(), web_search.WebSearchTool()]
    tools.append(web_fetch.WebFetchTool())
    for tool in tools:
        input_schema(tool.Input)


def tool_specs(tools: list[Tool]) -> tuple[ToolSpec, ...]:
    """The tools as the model sees them (an MCP server's tool brings its own JSON schema)."""
    return tuple(
        ToolSpec(tool.name, tool.description, getattr(tool, "input_schema", None) or input_schema(tool.Input))
        for tool in tools
    )
