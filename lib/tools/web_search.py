"""The `web_search` tool: Brave Search results (title, URL, snippet) for the model."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, ClassVar

import httpx
import msgspec

from lib.errors import SearchError
from lib.retry import Backoff, Retryable, retry
from lib.tools.base import ToolContext, ToolResult
from lib.tools.brave import MAX_COUNT, BraveSearch, SearchResult

if TYPE_CHECKING:
    from lib.config import Settings

# A 429 asking for at most two seconds is waited out once; longer ones go back to the model.
RATE_LIMIT_BACKOFF = Backoff(base=1.0, max_delay=2.0)


class WebSearchInput(msgspec.Struct, forbid_unknown_fields=True):
    query: Annotated[str, msgspec.Meta(description="What to search the web for.")]
    count: Annotated[int | None, msgspec.Meta(description=f"How many results, 1 to {MAX_COUNT}.")] = None


def enabled(settings: Settings) -> bool:
    """Offered only with BRAVE_SEARCH_API_KEY set."""
    return bool(settings.secrets.brave_search_api_key)


def format_results(query: str, results: list[SearchResult]) -> str:
    """Numbered results, one block each, as the model reads them."""
    if not results:
        return f"No web results for {query!r}."
    blocks = [f"{n}. {r.title}\n   {r.url}\n   {r.snippet}".rstrip() for n, r in enumerate(results, 1)]
    return "\n".join(blocks)


class WebSearchTool:
    """Searches the web with the Brave Search API."""

    name: ClassVar[str] = "web_search"
    description: ClassVar[str] = (
        "Search the web (Brave Search) for current information. Returns numbered results with title, URL "
        "and a short snippet. Use for facts that may have changed or that you do not know; cite the URLs."
    )
    Input: ClassVar[type[msgspec.Struct]] = WebSearchInput

    async def execute(self, args: WebSearchInput, context: ToolContext) -> ToolResult:
        """Search for `args.query` and list the results."""
        settings: Settings = context.settings
        key = settings.secrets.brave_search_api_key
        if not key:
            return ToolResult("Web search is not configured (no BRAVE_SEARCH_API_KEY).", is_error=True)
        query = args.query.strip()
        if not query:
            return ToolResult("web_search: empty query; pass what to search for.", is_error=True)
        count = max(1, min(args.count or settings.config.brave_search.count, MAX_COUNT))
        http = context.http
        if http is None:
            async with httpx.AsyncClient() as own:
                return await self._search(
                    BraveSearch(key, base_url=settings.secrets.brave_api_base, http_client=own), query, count
                )
        return await self._search(
            BraveSearch(key, base_url=settings.secrets.brave_api_base, http_client=http), query, count
        )

    async def _search(self, client: BraveSearch, query: str, count: int) -> ToolResult:
        def rate_limited(exc: Exception) -> Retryable | None:
            # A short 429 is waited out once; anything else goes straight back to the model.
            if isinstance(exc, SearchError) and exc.status == 429:
                return Retryable(exc.retry_after if exc.retry_after is not None else 1.0)
            return None

        try:
            results = await retry(
                lambda: client.search(query, count), retries=1, backoff=RATE_LIMIT_BACKOFF, classify=rate_limited
            )
        except SearchError as exc:
            if exc.status == 429:
                wait = exc.retry_after if exc.retry_after is not None else 1.0
                return ToolResult(
                    f"Web search is rate limited; try again in {wait:g} s or answer without it.",
                    is_error=True,
                    metadata={"retry_after": exc.retry_after},
                )
            return ToolResult(f"Web search failed: {exc.message}", is_error=True)
        return ToolResult(format_results(query, results), metadata={"results": len(results)})
