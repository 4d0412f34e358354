"""Ash's one retry policy for model calls, and the switch to the fallback provider.

The first model asked is [default_llm], or the `[models.NAME]` preset a chat picked with /model
(`preset`). The SDK clients never retry (`max_retries=0`). Here: retryable errors (429, 529
overloaded, 5xx, timeouts, dropped streams) are retried with exponential backoff that honours
`retry-after`, up to `agent.llm_retries` times; then the turn switches to `fallback_llm` (or,
when the file has none, to OpenAI's gpt-4o if OPENAI_API_KEY is set: see `fallback`).
OpenAI's 429 `insufficient_quota` switches at once. Non-retryable errors (400, 401, 404) stop
the call: the user gets a short message (lib/errors.py `user_message`), the log the full reason.

A client: it knows no storage. Each response carries its usage; the caller records it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from lib.config import IMPLICIT_FALLBACK, LLMConfig, Settings
from lib.errors import LLMError, LLMNotConfigured
from lib.llm.types import Completed, Message, Request, Response, TextDelta, ToolSpec
from lib.retry import Backoff, Retryable, Sleep, retry

if TYPE_CHECKING:
    from lib.llm.base import Provider

log = logging.getLogger("ash.llm")

KEY_VARIABLES = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}


@dataclass
class RetryPolicy:
    """Backoff between attempts; tests swap `sleep` (and the delays) so retries cost no time."""

    base_delay: float = 1.0
    # Longest wait we accept; a longer retry-after switches to the fallback instead.
    max_delay: float = 30.0
    sleep: Sleep = asyncio.sleep

    @property
    def backoff(self) -> Backoff:
        """The shared backoff helper with these delays."""
        return Backoff(self.base_delay, self.max_delay)


DEFAULT_POLICY = RetryPolicy()


def is_configured(settings: Settings, llm: LLMConfig) -> bool:
    """True when the provider has what it needs: a key (or, for OpenAI, a base URL)."""
    secrets = settings.secrets
    if llm.provider == "anthropic":
        return bool(secrets.anthropic_api_key)
    return bool(secrets.openai_api_key or secrets.openai_base_url)


def fallback(settings: Settings) -> LLMConfig | None:
    """The file's [fallback_llm]; without one, gpt-4o only when OPENAI_API_KEY is set.

    A base URL alone does not bring in the implicit fallback: OPENAI_BASE_URL usually names a
    local server, which has no gpt-4o and would answer "model not found"."""
    if settings.config.fallback_llm is not None:
        return settings.config.fallback_llm
    return IMPLICIT_FALLBACK if settings.secrets.openai_api_key else None


def primary(settings: Settings, preset: str | None = None) -> LLMConfig:
    """The model asked first: the named `[models.NAME]` preset, else [default_llm]."""
    return settings.config.default_llm if preset is None else settings.config.models[preset]


def section(preset: str | None) -> str:
    """The config table that names the model asked first."""
    return "[default_llm]" if preset is None else f"[models.{preset}]"


def missing_key_message(settings: Settings, preset: str | None = None) -> str:
    """Which variable to set so that a model can answer."""
    first = primary(settings, preset)
    wanted = [f"{KEY_VARIABLES[first.provider]} (for {section(preset)}, {first.provider})"]
    second = settings.config.fallback_llm
    if second is not None and second.provider != first.provider:
        wanted.append(f"{KEY_VARIABLES[second.provider]} (for [fallback_llm])")
    local = (
        f'set {section(preset)} provider = "openai" and model = the model it serves'
        if first.provider == "anthropic"
        else "set OPENAI_BASE_URL"
    )
    return (
        f"No language model is configured: set {' or '.join(wanted)}; "
        f"for an OpenAI-compatible server such as Ollama, {local}."
    )


def candidates(settings: Settings, preset: str | None = None) -> list[LLMConfig]:
    """The configured providers in order: `primary`, then the fallback (see `fallback`)."""
    found = [primary(settings, preset)]
    second = fallback(settings)
    if second is not None:
        found.append(second)
    usable = [llm for llm in found if is_configured(settings, llm)]
    for llm in found:
        if llm not in usable:
            log.debug("%s (%s) skipped: %s is not set", llm.provider, llm.model, KEY_VARIABLES[llm.provider])
    if not usable:
        raise LLMNotConfigured(missing_key_message(settings, preset))
    return usable


def build_provider(settings: Settings, llm: LLMConfig, *, timeout: float = 120.0) -> Provider:
    """A provider client for `llm` (imports its SDK on first use)."""
    secrets = settings.secrets
    if llm.provider == "anthropic":
        from lib.llm.anthropic_provider import AnthropicProvider

        return AnthropicProvider(secrets.anthropic_api_key or "", base_url=secrets.anthropic_base_url, timeout=timeout)
    from lib.llm.openai_provider import OpenAIProvider

    return OpenAIProvider(secrets.openai_api_key, base_url=secrets.openai_base_url, timeout=timeout)


class Router:
    """Calls the default model (or the chat's `preset`), retrying and falling back per the policy.

    `clients` is the process's cache of provider clients by provider name (Runtime.llm_providers):
    a turn reuses the connection of the previous one."""

    def __init__(
        self,
        settings: Settings,
        clients: dict[str, Provider],
        *,
        preset: str | None = None,
        policy: RetryPolicy | None = None,
    ):
        self.settings = settings
        self.clients = clients
        self.policy = policy or DEFAULT_POLICY
        self._candidates = candidates(settings, preset)
        # Once the fallback answered, later steps of the turn go straight to it.
        self._start = 0

    async def __aenter__(self) -> Router:
        return self

    async def __aexit__(self, *exc_info) -> None:
        # The clients belong to the runtime and outlive the turn (closed at shutdown).
        return None

    def _provider(self, index: int) -> Provider:
        llm = self._candidates[index]
        if llm.provider not in self.clients:
            self.clients[llm.provider] = build_provider(self.settings, llm)
        return self.clients[llm.provider]

    async def complete(
        self,
        *,
        system: str,
        messages: tuple[Message, ...],
        tools: tuple[ToolSpec, ...] = (),
        max_tokens: int | None = None,
        model: str | None = None,
    ) -> Response:
        """A non-streaming call under the retry and fallback policy."""
        return await self._run(system, messages, tools, max_tokens, model, None, None)

    async def stream(
        self,
        *,
        system: str,
        messages: tuple[Message, ...],
        tools: tuple[ToolSpec, ...] = (),
        on_text: Callable[[str], Awaitable[None]],
        on_restart: Callable[[], Awaitable[None]],
    ) -> Response:
        """A streaming call; `on_restart` runs when an attempt died after some text was shown."""
        return await self._run(system, messages, tools, None, None, on_text, on_restart)

    async def _run(self, system, messages, tools, max_tokens, model, on_text, on_restart) -> Response:
        last: LLMError | None = None
        for index in range(self._start, len(self._candidates)):
            llm = self._candidates[index]
            request = Request(
                system=system,
                messages=messages,
                tools=tools,
                # A model override (extraction_model) applies to the first provider only.
                model=model if model and index == 0 else llm.model,
                max_tokens=max_tokens or llm.max_tokens,
                temperature=llm.temperature,
            )
            try:
                response = await self._attempts(index, request, on_text, on_restart)
            except LLMError as exc:
                exc.model = exc.model or request.model
                if not (exc.retryable or exc.switch_provider):
                    raise
                last = exc
                if index + 1 < len(self._candidates):
                    log.warning("%s gave up (%s); switching to the fallback", llm.provider, exc.message)
                continue
            self._start = index
            return response if response.model else replace(response, model=request.model)
        assert last is not None
        raise last

    async def _attempts(self, index, request: Request, on_text, on_restart) -> Response:
        retries = max(0, self.settings.config.agent.llm_retries)
        provider = self._candidates[index].provider
        shown = False

        async def once() -> Response:
            nonlocal shown
            shown = False
            if on_text is None:
                return await self._provider(index).complete(request)
            response = None
            async with aclosing(self._provider(index).stream(request)) as events:
                async for event in events:
                    if isinstance(event, TextDelta):
                        shown = True
                        await on_text(event.text)
                    elif isinstance(event, Completed):
                        response = event.response
            if response is None:
                raise LLMError("the stream ended without a response", provider=provider, retryable=True)
            return response

        async def failed(exc: Exception, attempt: int) -> None:
            if not isinstance(exc, LLMError):
                return
            log.warning(
                "LLM call failed (%s %s, attempt %d of %d): %s",
                provider,
                request.model,
                attempt + 1,
                retries + 1,
                exc.message,
            )
            if shown and on_restart is not None:
                # Half an answer must not stay on screen looking final.
                await on_restart()

        def classify(exc: Exception) -> Retryable | None:
            if isinstance(exc, LLMError) and exc.retryable and not exc.switch_provider:
                return Retryable(exc.retry_after)
            return None

        return await retry(
            once,
            retries=retries,
            backoff=self.policy.backoff,
            classify=classify,
            sleep=self.policy.sleep,
            on_error=failed,
        )
