"""Asking a model on behalf of the agent: the router's answer, with its usage recorded.

The router (lib/llm/) is a client that knows no storage; every call Ash makes for a person
(a turn's steps, compaction, fact extraction) goes through here so that its tokens land in
the usage table and count against the daily budget.
"""

from __future__ import annotations

import asyncio

from lib.agent.usage import record_usage
from lib.llm.router import Router, build_provider, fallback, is_configured
from lib.llm.types import Message, Response
from lib.runtime import Runtime


def router_for(runtime: Runtime, preset: str | None = None) -> Router:
    """A router over the process's provider clients (kept for the process, not per call), asking
    the chat's model `preset` first when it picked one."""
    return Router(runtime.settings, runtime.llm_providers, preset=preset)


async def ready_router(runtime: Runtime, preset: str | None = None) -> Router:
    """`router_for`, once the server's warm-up has loaded the model clients (lib/runtime.py Warmup):
    building one on the event loop would import its SDK there."""
    await runtime.ready()
    return router_for(runtime, preset)


def warm_models(runtime: Runtime) -> None:
    """Build the client of every configured model and load what its first call imports (runs on
    the warm-up thread, before any turn may use them)."""
    settings = runtime.settings
    config = settings.config
    wanted = [config.default_llm, *config.models.values()]
    second = fallback(settings)
    if second is not None:
        wanted.append(second)
    for llm in wanted:
        if llm.provider in runtime.llm_providers or not is_configured(settings, llm):
            continue
        provider = build_provider(settings, llm)
        provider.warm()
        runtime.llm_providers[llm.provider] = provider


async def record(
    runtime: Runtime, response: Response, *, user_id: str | None, session_id: int | None = None, purpose: str
) -> None:
    """Store one call's token usage (and cost) for `ash usage` and the daily budget."""
    await asyncio.to_thread(
        lambda: record_usage(
            runtime.db.conn(),
            runtime.settings,
            provider=response.provider,
            model=response.model,
            usage=response.usage,
            user_id=user_id,
            session_id=session_id,
            purpose=purpose,
        )
    )


async def complete_text(
    runtime: Runtime,
    *,
    system: str,
    prompt: str,
    model: str | None = None,
    max_tokens: int = 1024,
    user_id: str | None = None,
    purpose: str = "extraction",
) -> str:
    """One non-streaming text answer under the router's retry and fallback policy, usage recorded."""
    router = await ready_router(runtime)
    response = await router.complete(
        system=system, messages=(Message.user_text(prompt),), max_tokens=max_tokens, model=model
    )
    await record(runtime, response, user_id=user_id, purpose=purpose)
    return response.text
