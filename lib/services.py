"""Background services the server runs next to its handlers."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lib.runtime import Runtime


async def start_services(runtime: Runtime) -> None:
    """Start every background service and register it on the runtime for shutdown."""
    from lib.inbox_writer import InboxWriter

    # First in, last out: the processor and memory service stop before the writer does.
    writer = InboxWriter(runtime.settings.database_path, runtime.settings.bot_id)
    runtime.services.append(writer)
    await writer.start()
    runtime.inbox_writer = writer

    from lib.processor import Processor

    processor = Processor(runtime)
    runtime.services.append(processor)
    await processor.start()

    from lib.memory.service import MemoryService

    memory = MemoryService(runtime)
    runtime.services.append(memory)
    await memory.start()
