"""Brave Search API client: web results as title, URL and snippet, over the shared httpx client.

API: GET {BRAVE_API_BASE}/res/v1/web/search?q=...&count=N with the key in X-Subscription-Token
(https://api-dashboard.search.brave.com/app/documentation/web-search/get-started).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

import httpx
import msgspec

from lib.errors import SearchError

SEARCH_PATH = "/res/v1/web/search"
# The API refuses more than 20 results a request.
MAX_COUNT = 20
TAG = re.compile(r"<[^>]+>")


@dataclass(frozen=True)
class SearchResult:
    title: str
    url: str
    snippet: str


class _WebResult(msgspec.Struct):
    title: str = ""
    url: str = ""
    description: str = ""


class _Web(msgspec.Struct):
    results: list[_WebResult] = msgspec.field(default_factory=list)


class _SearchResponse(msgspec.Struct):
    web: _Web | None = None


class _ErrorBody(msgspec.Struct):
    detail: str = ""
    code: str = ""


class _ErrorResponse(msgspec.Struct):
    error: _ErrorBody | None = None


_decode_search = msgspec.json.Decoder(_SearchResponse).decode
_decode_error = msgspec.json.Decoder(_ErrorResponse).decode


def plain(text: str) -> str:
    """Brave marks matches with <strong>; the model wants plain text."""
    return html.unescape(TAG.sub("", text)).strip()


def retry_after(response: httpx.Response) -> float | None:
    """Seconds to wait after a 429: Retry-After, else the first (per-second) X-RateLimit-Reset window."""
    for header in ("retry-after", "x-ratelimit-reset"):
        value = response.headers.get(header, "").split(",")[0].strip()
        try:
            return max(float(value), 0.0)
        except ValueError:
            continue
    return None


def _error_detail(response: httpx.Response) -> str:
    try:
        body = _decode_error(response.content)
    except msgspec.DecodeError:
        return response.text[:200].strip() or response.reason_phrase
    if body.error and (body.error.detail or body.error.code):
        return f"{body.error.detail} ({body.error.code})" if body.error.code else body.error.detail
    return response.reason_phrase


class BraveSearch:
    """Searches the web through Brave; every failure is a SearchError."""

    def __init__(self, api_key: str, *, base_url: str, http_client: httpx.AsyncClient, timeout: float = 15.0):
        self.api_key = api_key
        self.base_url = base_url.rstrip("/")
        self.http = http_client
        self.timeout = timeout

    async def search(self, query: str, count: int = 5) -> list[SearchResult]:
        """The top `count` web results for `query` (count capped at the API's 20)."""
        params = {"q": query, "count": max(1, min(count, MAX_COUNT))}
        headers = {"Accept": "application/json", "X-Subscription-Token": self.api_key}
        try:
            response = await self.http.get(
                self.base_url + SEARCH_PATH, params=params, headers=headers, timeout=self.timeout
            )
        except httpx.TimeoutException:
            raise SearchError("Brave Search timed out") from None
        except httpx.HTTPError as exc:
            raise SearchError(f"Brave Search cannot be reached: {exc}") from None
        if response.status_code == 429:
            raise SearchError(
                f"Brave Search rate limit: {_error_detail(response)}",
                status=429,
                retry_after=retry_after(response),
            )
        if response.status_code in (401, 403):
            raise SearchError(
                f"Brave Search refused the key ({response.status_code}): check BRAVE_SEARCH_API_KEY",
                status=response.status_code,
            )
        if response.status_code != 200:
            raise SearchError(
                f"Brave Search failed ({response.status_code}): {_error_detail(response)}", status=response.status_code
            )
        try:
            body = _decode_search(response.content)
        except msgspec.DecodeError as exc:
            raise SearchError(f"Brave Search sent an unreadable answer: {exc}", status=200) from None
        results = body.web.results if body.web else []
        return [SearchResult(title=plain(r.title), url=r.url, snippet=plain(r.description)) for r in results if r.url][
            : params["count"]
        ]
