"""Brave Search client: recorded payloads through respx, results parsed, errors typed."""

from __future__ import annotations

import httpx
import pytest
import respx

from lib.errors import SearchError
from lib.tools.brave import BraveSearch
from tests.conftest import fixture_bytes

BASE = "https://brave.test"


@pytest.fixture
async def http():
    async with httpx.AsyncClient() as client:
        yield client


async def test_results_parsed_as_title_url_and_plain_snippet(http):
    with respx.mock(assert_all_called=True) as mock:
        route = mock.get(f"{BASE}/res/v1/web/search").respond(
            200, content=fixture_bytes("brave", "web_search_blu_tack.json")
        )
        results = await BraveSearch("k-123", base_url=BASE, http_client=http).search("Blue tack", count=3)
    assert [r.title for r in results] == ["Blu Tack - Wikipedia"]
    assert results[0].url == "https://en.wikipedia.org/wiki/Blu_Tack"
    # Brave marks the matched words with <strong>; the model gets plain text.
    assert results[0].snippet.startswith(
        "Blu Tack is a reusable putty-like pressure-sensitive adhesive produced by Bostik"
    )
    assert "<strong>" not in results[0].snippet
    request = route.calls.last.request
    assert request.headers["X-Subscription-Token"] == "k-123"
    assert request.url.params["q"] == "Blue tack"
    assert request.url.params["count"] == "3"


async def test_count_is_capped_at_the_api_maximum(http):
    with respx.mock() as mock:
        route = mock.get(f"{BASE}/res/v1/web/search").respond(200, json={"web": {"results": []}})
        assert await BraveSearch("k", base_url=BASE, http_client=http).search("x", count=500) == []
    assert route.calls.last.request.url.params["count"] == "20"


async def test_429_is_typed_with_retry_after(http):
    with respx.mock() as mock:
        mock.get(f"{BASE}/res/v1/web/search").respond(
            429,
            content=fixture_bytes("brave", "error_429_rate_limited.json"),
            headers={"X-RateLimit-Reset": "1, 1419"},
        )
        with pytest.raises(SearchError) as caught:
            await BraveSearch("k", base_url=BASE, http_client=http).search("x")
    assert caught.value.status == 429
    assert caught.value.retry_after == 1.0
    assert "Request rate limit exceeded for plan" in caught.value.message


@pytest.mark.parametrize(
    ("status", "expected"), [(401, "BRAVE_SEARCH_API_KEY"), (500, "Brave Search failed (500)"), (422, "(422)")]
)
async def test_other_errors_are_typed(http, status, expected):
    with respx.mock() as mock:
        mock.get(f"{BASE}/res/v1/web/search").respond(status, text="nope")
        with pytest.raises(SearchError) as caught:
            await BraveSearch("k", base_url=BASE, http_client=http).search("x")
    assert caught.value.status == status
    assert expected in caught.value.message


async def test_network_failure_is_a_search_error(http):
    with respx.mock() as mock:
        mock.get(f"{BASE}/res/v1/web/search").mock(side_effect=httpx.ConnectError("refused"))
        with pytest.raises(SearchError, match="cannot be reached"):
            await BraveSearch("k", base_url=BASE, http_client=http).search("x")
