"""The server's start-up and shutdown: build the runtime, wire the services, close them.

This is the one place that knows how the parts fit together: the inbox worker is handed the
Telegram update handler, which is handed the agent's turn, which is handed the memory service
to tell about new turns; the memory service is handed the function that asks a model; the
scheduler is handed the worker's wake-up, and listens on the runtime's `schedule_changed`
signal, which the schedule tools emit (lib/runtime.py Signals).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import multiprocessing
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from litestar import Litestar

from lib.auth_limit import AuthLimiter, behind_fly
from lib.config import load_settings
from lib.db import Database
from lib.redact import install as install_redaction
from lib.replica.writer_rule import writer_rule
from lib.runtime import Runtime, Warmup
from lib.web.state import Services

if TYPE_CHECKING:
    from lib.agent import TurnInput, TurnResult
    from lib.telegram.sink import TelegramSink
    from lib.telegram.updates import Runner

log = logging.getLogger("ash")

# Seconds after start-up before the command menu is checked: it is not urgent, and the first
# moments belong to answering Telegram after a deploy (cold start).
MENU_DELAY = 2.0
# Seconds after start-up before the scheduler loads (~10 ms of imports) and fires what fell due
# while the server was down: late already, those runs can wait that long for the first answer.
SCHEDULER_DELAY = 0.5


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_supervisor() -> None:
    """In a granian worker: be sent SIGTERM the moment the supervisor dies, however it dies.

    `ash serve` is a supervisor process with one worker process. A supervisor killed with
    SIGKILL runs no shutdown code, and its worker went on serving the port with the old
    configuration (its old webhook secret) beside the next server. Linux's parent-death signal
    ends the worker with its parent; SIGTERM runs the normal shutdown (claims are released)."""
    parent = multiprocessing.parent_process()
    if parent is None or not sys.platform.startswith("linux"):
        return  # not a worker (tests, `ash chat`), or no prctl
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        log.warning("could not ask to die with the supervisor (errno %d)", ctypes.get_errno())
        return
    if os.getppid() != parent.pid:  # the supervisor died before the request took effect
        os.kill(os.getpid(), signal.SIGTERM)


# What the first turn, command, button press and scheduled run import on the event loop, loaded
# instead on the warm-up thread just after start-up (lib/runtime.py Warmup); the model clients
# are built there too (lib/agent/models.py warm_models). tests/web/test_first_turn.py fails when
# a first turn still imports anything on the loop.
FIRST_TURN_MODULES = (
    "lib.agent.turn",
    "lib.agent.resume",
    "lib.agent.history",
    "lib.agent.models",
    "lib.tools.registry",
    "lib.telegram.approvals",
    "lib.conversation.why",
    "lib.telegram.scheduled",
    "lib.telegram.reading",
    "lib.telegram.listening",
    "lib.telegram.menu",
    "lib.telegram.chat_moves",
    "lib.inbox.scheduler",
    "docker",  # asked whether the sandbox is on (lib/sandbox/availability.py)
    "encodings.idna",  # host names in URLs
    "encodings.utf_16_le",  # Telegram counts message length in UTF-16 units
)


# Seconds after start-up before the warm-up loads (a turn that comes sooner starts it at once):
# the server's first answers come first.
WARMUP_DELAY = 1.0


def start_warmup(runtime: Runtime) -> None:
    """Load what the first turn needs on a thread of its own; turns wait for it (`runtime.ready`)."""

    def prepare() -> None:
        from lib.agent import warm_models
        from lib.tools.registry import warm_schemas

        _ = runtime.http  # the shared HTTP client (its CA bundle takes ~50 ms to load)
        warm_models(runtime)
        warm_schemas()  # the tools' JSON schemas, built once

    runtime.warmup = Warmup(FIRST_TURN_MODULES, prepare)
    runtime.warmup.start(delay=WARMUP_DELAY)


def agent_turn(runtime: Runtime, services: Services) -> Runner:
    """The agent's turn for the Telegram handler, handed the memory service.

    The agent (and through it numpy, the memory index and the tools) is imported on the first
    turn, not at start-up: cold start is how long Telegram waits after a deploy."""

    async def run(turn: TurnInput, sink: TelegramSink) -> TurnResult:
        from lib.telegram.approvals import run_agent_turn

        return await run_agent_turn(runtime, turn, sink, housekeeper=services.memory)

    return run


async def start_scheduler(runtime: Runtime, services: Services, delay: float = SCHEDULER_DELAY) -> None:
    """Fire scheduled tasks into the inbox, waking the inbox worker for them."""
    await asyncio.sleep(delay)
    await runtime.ready()
    from lib.inbox.scheduler import Scheduler

    scheduler = Scheduler(
        runtime.db,
        runtime.settings,
        runtime.settings.bot_id,
        wake=services.inbox_worker.kick,
        schedule_changed=runtime.signals.schedule_changed,
        clock=runtime.clock,
    )
    await scheduler.start()
    services.scheduler = scheduler


def model_text(runtime: Runtime) -> Callable[..., Awaitable[str]]:
    """How memory asks a model for text: the router, with usage recorded (imported on first use)."""

    async def complete(**kwargs) -> str:
        from lib.agent import complete_text

        return await complete_text(runtime, **kwargs)

    return complete


def review_messages(runtime: Runtime, services: Services) -> Callable[[], Awaitable[None]]:
    """How consolidation's proposals reach their reviewers: a review message queued into the
    inbox (lib/telegram/review_message.py), the worker woken for it. Without a bot token they wait."""

    async def announce() -> None:
        if not runtime.settings.bot_id:
            return
        from lib.telegram.review_message import queue_reviews

        conn_of, settings = runtime.db.conn, runtime.settings
        queued = await asyncio.to_thread(lambda: queue_reviews(conn_of(), settings, settings.bot_id, runtime.clock()))
        if queued and services.inbox_worker is not None:
            services.inbox_worker.kick()

    return announce


async def publish_command_menu(runtime: Runtime, delay: float = MENU_DELAY) -> None:
    """Set Telegram's command menu from the command registry if it changed since the last start."""
    await asyncio.sleep(delay)
    await runtime.ready()
    from lib.telegram.client import TelegramClient
    from lib.telegram.menu import sync_command_menu

    secrets = runtime.settings.secrets
    await sync_command_menu(TelegramClient(runtime.http, secrets.telegram_bot_token, secrets.telegram_api_base))


async def start_services(runtime: Runtime, services: Services) -> None:
    """Start every background service, in the order they depend on each other."""
    from lib.inbox.group_commit import InboxWriter

    services.writer = InboxWriter(runtime.settings.database_path, runtime.settings.bot_id)
    await services.writer.start()
    await start_turns(runtime, services)


async def start_turns(runtime: Runtime, services: Services) -> None:
    """Start what takes and runs turns: the inbox worker, memory housekeeping, the scheduler
    (also after a restore, lib/web/restore.py)."""
    from lib.memory.service import MemoryService
    from lib.telegram.updates import telegram_worker

    services.inbox_worker = telegram_worker(runtime, runner=agent_turn(runtime, services))
    services.memory = MemoryService(
        runtime.db, runtime.settings, complete=model_text(runtime), announce=review_messages(runtime, services)
    )
    await services.inbox_worker.start()
    await services.memory.start()
    if runtime.settings.config.mcp.servers:
        from lib.tools.mcp_client import warm_up

        warm_up(runtime.settings)  # outside MCP servers started and their tools listed, on a thread of their own
    if runtime.settings.secrets.telegram_bot_token:
        services.command_menu = asyncio.create_task(publish_command_menu(runtime), name="ash-command-menu")
        # Without a token nothing could be sent: tasks stay due, and fire (late) once there is one.
        services.scheduler_start = asyncio.create_task(start_scheduler(runtime, services), name="ash-scheduler-start")


async def stop_services(services: Services) -> None:
    """Stop in reverse: turns and housekeeping first, the webhook's writer last."""
    await stop_turns(services)
    if services.writer is not None:
        await services.writer.stop()


async def stop_turns(services: Services) -> None:
    """Stop taking turns: running ones are cancelled and release their claims (they resume, editing
    the message they had started, when the inbox worker starts again)."""
    for task in (services.command_menu, services.scheduler_start):
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    # The scheduler first: nothing is queued once the inbox worker is gone.
    for service in (services.scheduler, services.memory, services.inbox_worker):
        if service is not None:
            await service.stop()
    services.command_menu = services.scheduler_start = services.scheduler = None
    services.memory = services.inbox_worker = None


def close_database(runtime: Runtime) -> None:
    """Close every connection to the database (hybrid searches' second ones too): the last one
    to close folds the WAL into the file, so the next start has nothing to recover."""
    from lib.memory.api import close_side_connections

    close_side_connections()
    runtime.db.close()


async def watch_config(runtime: Runtime) -> None:
    """Apply a changed config.toml or secrets.env without a restart (lib/web/reload.py)."""
    from lib.web.reload import watch

    await watch(runtime, runtime.settings.config.server.tick_interval)


@asynccontextmanager
async def lifespan(app: Litestar) -> AsyncIterator[None]:
    """Open shared resources at start-up and close them at shutdown."""
    die_with_supervisor()
    settings = load_settings()
    install_redaction(settings.secrets)
    runtime = Runtime(settings=settings, db=Database(settings.database_path))
    services = Services()
    app.state.runtime = runtime
    app.state.services = services
    app.state.auth_limiter = AuthLimiter(trust_fly_header=behind_fly(os.environ))
    if not settings.secrets.telegram_webhook_secret:
        log.warning("TELEGRAM_WEBHOOK_SECRET is not set: the webhook refuses every update (403) until it is")
    # One writer owns the database; another machine runs no inbox worker, tick, scheduler or
    # Litestream and replays whatever writes to the writer (lib/web/write_gate.py).
    app.state.writer_rule = rule = writer_rule(settings, os.environ)
    try:
        if rule.is_writer:
            start_warmup(runtime)
            await start_services(runtime, services)
        else:
            log.warning("%s; no inbox worker or scheduler runs here", rule.describe())
        services.config_watch = asyncio.create_task(watch_config(runtime), name="ash-config-watch")
        yield
    finally:
        if services.config_watch is not None:
            services.config_watch.cancel()
        await stop_services(services)
        if settings.config.mcp.servers:
            from lib.tools.mcp_client import close_sessions

            await asyncio.to_thread(close_sessions)  # outside MCP servers' sessions and processes
        await runtime.close_llm_providers()
        await runtime.close_http()
        close_database(runtime)
        if runtime.warmup is not None:
            runtime.warmup.thaw()
