"""The `bash` tool: run a shell command in the chat's locked-down Docker sandbox."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, ClassVar

import msgspec

from lib.errors import DockerError
from lib.tools.base import ToolContext, ToolResult

if TYPE_CHECKING:
    from lib.sandbox.container import Sandbox


class BashInput(msgspec.Struct, forbid_unknown_fields=True):
    command: Annotated[str, msgspec.Meta(description="The shell command line to run, as you would type it in bash.")]


class BashTool:
    """Runs commands in a per-chat container: no network, memory/CPU/pids limits, a time limit."""

    name: ClassVar[str] = "bash"
    description: ClassVar[str] = (
        "Run a shell command (bash -c) in an isolated Linux sandbox and get its output and exit code. "
        "The working directory /workspace is private to this chat, limited in size and kept between commands "
        "(deleted after a long time unused); /tmp is "
        "scratch space cleared on restart; the rest of the filesystem is read-only. There is no network "
        "access unless the operator enabled it. Commands are killed after a time limit and long output is cut in "
        "the middle; background processes are killed when the command ends. "
        "The default image has bash, coreutils, python3, curl and git."
    )
    Input: ClassVar[type[msgspec.Struct]] = BashInput

    def __init__(self, sandbox: Sandbox | None = None):
        self._sandbox = sandbox

    def sandbox_for(self, context: ToolContext) -> Sandbox:
        """The sandbox to use: injected, else the runtime's, else one shared per configuration."""
        from lib.sandbox.container import shared_sandbox

        if self._sandbox is not None:
            return self._sandbox
        if context.sandbox is not None:
            return context.sandbox
        return shared_sandbox(context.settings.config.sandbox)

    async def execute(self, args: BashInput, context: ToolContext) -> ToolResult:
        """Run `args.command` in the sandbox of the context's chat."""
        from lib.sandbox.layout import chat_key
        from lib.sandbox.output import describe

        command = args.command.strip()
        if not command:
            return ToolResult("bash: empty command; pass the shell command to run.", is_error=True)
        sandbox = self.sandbox_for(context)
        try:
            result = await sandbox.run(chat_key(context.provider, context.chat_id), command)
        except DockerError as exc:
            # The turn goes on: the model hears why and can answer without the sandbox.
            return ToolResult(f"The sandbox is unavailable: {exc.message}", is_error=True)
        return ToolResult(
            describe(result, sandbox.config),
            is_error=result.timed_out or result.oom or result.exit_code != 0,
            exit_code=result.exit_code,
            metadata={
                "duration_ms": round(result.duration * 1000),
                "timed_out": result.timed_out,
                "oom": result.oom,
                "truncated": result.truncated,
                "output_bytes": result.output_bytes,
            },
        )
