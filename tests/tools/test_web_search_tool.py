"""The web_search tool: offered only with a key, results formatted, a 429 handled for the model."""

from __future__ import annotations

import httpx
import pytest
import respx

from lib.config import load_settings
from lib.tools.base import ToolContext, input_schema
from lib.tools.web_search import WebSearchInput, WebSearchTool, enabled
from tests.conftest import fixture_bytes

BASE = "https://brave.test"


@pytest.fixture
def keyed(monkeypatch, ash_home):
    monkeypatch.setenv("BRAVE_SEARCH_API_KEY", "secret-brave-key")
    monkeypatch.setenv("BRAVE_API_BASE", BASE)
    return load_settings()


@pytest.fixture
async def context(keyed):
    async with httpx.AsyncClient() as http:
        yield ToolContext(user_id="1", chat_id="1", session_id=None, settings=keyed, http=http)


def test_not_offered_without_a_key(settings):
    from lib.tools.registry import available_tools

    assert enabled(settings) is False
    assert "web_search" not in [tool.name for tool in available_tools(settings)]


def test_offered_with_a_key(keyed):
    from lib.tools.registry import available_tools

    assert enabled(keyed) is True
    assert "web_search" in [tool.name for tool in available_tools(keyed)]
    schema = input_schema(WebSearchTool.Input)
    assert schema["required"] == ["query"]


async def test_results_formatted_for_the_model(context):
    with respx.mock() as mock:
        route = mock.get(f"{BASE}/res/v1/web/search").respond(
            200, content=fixture_bytes("brave", "web_search_blu_tack.json")
        )
        result = await WebSearchTool().execute(WebSearchInput(query="Blue tack"), context)
    assert not result.is_error
    assert result.output.startswith(
        "1. Blu Tack - Wikipedia\n   https://en.wikipedia.org/wiki/Blu_Tack\n   Blu Tack is"
    )
    # Without a count the configured brave_search.count applies.
    assert route.calls.last.request.url.params["count"] == "5"
    assert route.calls.last.request.headers["X-Subscription-Token"] == "secret-brave-key"


async def test_short_429_is_waited_out_once(context):
    with respx.mock() as mock:
        route = mock.get(f"{BASE}/res/v1/web/search")
        route.side_effect = [
            httpx.Response(
                429, content=fixture_bytes("brave", "error_429_rate_limited.json"), headers={"Retry-After": "0"}
            ),
            httpx.Response(200, content=fixture_bytes("brave", "web_search_blu_tack.json")),
        ]
        result = await WebSearchTool().execute(WebSearchInput(query="Blue tack", count=2), context)
    assert route.call_count == 2
    assert not result.is_error
    assert "Blu Tack - Wikipedia" in result.output


async def test_long_429_goes_back_to_the_model(context):
    with respx.mock() as mock:
        route = mock.get(f"{BASE}/res/v1/web/search").respond(
            429, content=fixture_bytes("brave", "error_429_rate_limited.json"), headers={"X-RateLimit-Reset": "30, 999"}
        )
        result = await WebSearchTool().execute(WebSearchInput(query="Blue tack"), context)
    assert route.call_count == 1
    assert result.is_error
    assert "rate limited; try again in 30 s" in result.output
    assert result.metadata["retry_after"] == 30.0


async def test_server_error_is_reported_not_raised(context):
    with respx.mock() as mock:
        mock.get(f"{BASE}/res/v1/web/search").respond(503, text="upstream down")
        result = await WebSearchTool().execute(WebSearchInput(query="x"), context)
    assert result.is_error
    assert "Web search failed" in result.output and "503" in result.output
