"""The tools offered to the model: memory tools, bash in the sandbox, web search.

Each tool module is imported lazily and may not exist yet (other areas build them); a missing
module is skipped with a debug log so a turn never breaks because of it.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

from lib.config import Settings
from lib.llm.types import ToolSpec
from lib.tools.base import Tool, input_schema

log = logging.getLogger("ash.tools")

# (module, attribute holding a Tool class, an instance, or a list of them)
TOOL_MODULES = (
    ("lib.tools.memory_tools", "TOOLS"),
    ("lib.tools.bash", "BashTool"),
    ("lib.tools.web_search", "WebSearchTool"),
)


def _instances(value: Any) -> list[Tool]:
    items = value if isinstance(value, list | tuple) else [value]
    return [item() if isinstance(item, type) else item for item in items]


def available_tools(settings: Settings) -> list[Tool]:
    """Every tool enabled for this configuration, in a stable order."""
    tools: list[Tool] = []
    for module_name, attribute in TOOL_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                log.warning("tool module %s cannot be imported: %s", module_name, exc)
            else:
                log.debug("tool module %s does not exist yet; skipped", module_name)
            continue
        except Exception:
            log.warning("tool module %s failed to import; skipped", module_name, exc_info=True)
            continue
        if module_name == "lib.tools.web_search" and not settings.secrets.brave_search_api_key:
            continue
        enabled = getattr(module, "enabled", None)
        if enabled is not None and not enabled(settings):
            continue
        value = getattr(module, attribute, None)
        if value is None:
            log.warning("tool module %s has no %s; skipped", module_name, attribute)
            continue
        tools.extend(_instances(value))
    return tools


def tool_specs(tools: list[Tool]) -> tuple[ToolSpec, ...]:
    """The tools as the model sees them."""
    return tuple(ToolSpec(tool.name, tool.description, input_schema(tool.Input)) for tool in tools)
