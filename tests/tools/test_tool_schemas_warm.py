"""A turn builds no tool schema on the event loop: every built-in tool's JSON schema is built by
the server's warm-up and kept (lib/tools/base.py input_schema). Built per turn, msgspec's schema
generation held the event loop 80 ms at a first turn (seen in the soak, tests/faults/test_soak.py).
A tool added to the registry but not to the warm-up fails here."""

from __future__ import annotations

import msgspec

from lib.config import load_settings
from lib.tools.base import input_schema
from lib.tools.registry import available_tools, tool_specs, warm_schemas


def test_every_offered_tool_has_its_schema_from_the_warm_up(ash_home, monkeypatch):
    (ash_home / "config.toml").write_text('[sandbox]\nenabled = true\n[embeddings]\nprovider = "none"\n')
    monkeypatch.setenv("BRAVE_SEARCH_API_KEY", "brave-test-key")
    settings = load_settings()
    input_schema.cache_clear()
    warm_schemas()

    def built_on_a_turn(*args, **kwargs):
        raise AssertionError("a tool's schema was built on a turn, not by the warm-up")

    monkeypatch.setattr(msgspec.json, "schema_components", built_on_a_turn)
    tools = available_tools(settings)
    assert {"bash", "web_search", "web_fetch", "set_timezone"} <= {tool.name for tool in tools}
    specs = tool_specs(tools)
    assert all(spec.input_schema["type"] == "object" for spec in specs)
