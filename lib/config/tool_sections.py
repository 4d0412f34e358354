"""The tables of config.toml for what Ash can do besides talking: the sandbox, web search and
fetch, transcription, documents, MCP servers, the scheduler and replication."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from lib.config.values import BraveCount, Count, NonNegative, NonNegativeInt, Positive, Table, about


class SandboxConfig(Table):
    """The `bash` tool's Docker container."""

    enabled: Annotated[
        Literal["auto"] | bool,
        about(
            '"auto": offer the bash tool only while a Docker engine answers (asked at most every 30 s); true: '
            "always (a missing engine is an error the model hears); false: never."
        ),
    ] = "auto"
    image: Annotated[str, about("The sandbox image (`ash sandbox build` makes it).")] = "ash-sandbox:latest"
    timeout: Annotated[Positive, about("Seconds of wall clock per command.")] = 60.0
    memory_limit: Annotated[str, about('Memory a container may use, in Docker\'s units ("512m", "1g").')] = "512m"
    cpu_limit: Annotated[Positive, about("CPUs a container may use.")] = 1.0
    pids_limit: Annotated[Count, about("Processes a container may run at once.")] = 128
    network_disabled: Annotated[bool, about("No network inside the container.")] = True
    output_limit: Annotated[Count, about("Bytes of a command's output returned to the model (head and tail kept).")] = (
        16_000
    )
    idle_timeout: Annotated[
        Positive, about("Seconds a warm per-chat container may sit idle before it is removed (/workspace is kept).")
    ] = 600.0
    workspace_limit: Annotated[
        str, about('Size of each chat\'s /workspace; writing past it fails with "No space left on device".')
    ] = "1g"
    workspace_ttl_days: Annotated[
        NonNegative, about("Days a chat may go without a command before its /workspace is deleted (0: never).")
    ] = 30.0
    approval: Annotated[
        Literal["untrusted", "always", "never"],
        about(
            "When a risky tool call (bash, schedule, memory writes, MCP tools, a web request the person did "
            'not ask for) waits for the person\'s Run / Deny: "untrusted" while the turn holds content from '
            'outside (web pages, documents, forwards, other members\' messages, tool output); "always"; "never".'
        ),
    ] = "untrusted"
    approval_timeout: Annotated[Positive, about("Seconds a call may wait for its approval; then it is denied.")] = 600.0


class BraveSearchConfig(Table):
    """The `web_search` tool (BRAVE_SEARCH_API_KEY)."""

    count: Annotated[BraveCount, about("Results per search.")] = 5


class TranscriptionConfig(Table):
    """Voice notes, audio and video notes become the turn's text."""

    provider: Annotated[
        Literal["openai", "local", "none"],
        about(
            '"openai": an OpenAI-compatible /v1/audio/transcriptions endpoint (OPENAI_API_KEY, optional '
            'with base_url); "local": faster-whisper on this machine (the local-transcription extra); '
            '"none": voice notes get a reply saying Ash cannot listen to them.'
        ),
    ] = "openai"
    model: Annotated[str | None, about('Unset: "whisper-1" for openai, "base" (the only bundled model) for local.')] = (
        None
    )
    base_url: Annotated[
        str | None,
        about("An origin such as http://whisper:8000 for a self-hosted server; unset: OPENAI_BASE_URL or OpenAI."),
    ] = None
    # The Bot API serves files up to 20 MB.
    max_bytes: Annotated[
        Count, about("Bytes of audio accepted; a larger file is refused without being downloaded.")
    ] = 20_000_000
    idle_unload: Annotated[
        Positive, about("Seconds the local model stays loaded after its last use (it holds about 300 MB).")
    ] = 300.0


class DocumentsConfig(Table):
    """Files sent to Ash: PDF, text, Markdown, CSV, JSON, source code, images."""

    max_bytes: Annotated[
        Count, about("Bytes of a file accepted; a larger one is refused without being downloaded.")
    ] = 10_000_000
    max_pages: Annotated[Count, about("Pages of a PDF read; the rest is left out with a note.")] = 100
    max_chars: Annotated[
        Count, about("Characters of a document that enter the turn (the rest is cut, with a note saying so).")
    ] = 40_000
    max_index_chars: Annotated[Count, about("Characters of a document memory keeps for later questions.")] = 400_000
    # The reader is a separate process (lib/senses/parsing.py), killed at this limit. A 100-page
    # PDF of plain text takes a few seconds; one built to be slow, minutes a page.
    read_timeout: Annotated[
        Positive,
        about(
            "Seconds to read a PDF's text, waiting for a free reader included; then the person is told it "
            "took too long."
        ),
    ] = 60.0


class WebFetchConfig(Table):
    """The `web_fetch` tool: reads a public web page (never a private or internal address)."""

    enabled: Annotated[bool, about("Offer the web_fetch tool.")] = True
    max_bytes: Annotated[
        Count, about("Bytes read from a page before it is cut off (on the wire and decompressed).")
    ] = 3_000_000
    timeout: Annotated[
        Positive,
        about("Seconds for the whole fetch: every lookup, redirect and byte, and reading the text out of the page."),
    ] = 20.0
    max_redirects: Annotated[NonNegativeInt, about("Redirects followed.")] = 5
    max_chars: Annotated[Count, about("Characters of extracted text handed to the model.")] = 20_000


class McpServerConfig(Table):
    """One MCP server whose tools Ash offers the model as NAME__tool: a command (stdio) or a url."""

    command: Annotated[str | None, about("The program of a stdio server (it runs outside the sandbox).")] = None
    args: Annotated[list[str], about("The program's arguments.")] = msgspec.field(default_factory=list)
    env: Annotated[
        dict[str, str],
        about("The stdio server's environment (besides PATH and HOME); values may name variables as ${NAME}."),
    ] = msgspec.field(default_factory=dict)
    url: Annotated[str | None, about("The address of a Streamable HTTP server.")] = None
    headers: Annotated[
        dict[str, str], about("Headers sent to an HTTP server; values may name variables as ${NAME}.")
    ] = msgspec.field(default_factory=dict)
    start_timeout: Annotated[
        Positive, about("Seconds to start and list its tools (a failure is logged and skipped).")
    ] = 15.0
    call_timeout: Annotated[Positive, about("Seconds for one tool call; then the model hears it timed out.")] = 60.0
    output_limit: Annotated[Count, about("Characters of a tool's result kept.")] = 16_000


class McpConfig(Table):
    """Outside MCP servers whose tools Ash offers the model."""

    servers: Annotated[
        dict[str, McpServerConfig],
        about("One [mcp.servers.NAME] table per server; its tools are offered as NAME__tool."),
    ] = msgspec.field(default_factory=dict)


class SchedulerConfig(Table):
    """Reminders and scheduled tasks (the `schedule` tool, /reminders, `ash schedule`)."""

    max_lateness: Annotated[
        NonNegative,
        about(
            "Seconds a run missed while Ash was down may be late and still run once, with a note that it is "
            "late; a later one is skipped and logged."
        ),
    ] = 21600.0
    max_jobs_per_user: Annotated[Count, about("Active scheduled tasks one person may have.")] = 50
    min_prompt_interval: Annotated[
        Positive, about("Seconds between runs of a task that runs a prompt (each run is a turn of the model).")
    ] = 3600.0


class FollowupsConfig(Table):
    """Ash follows up after events it noticed (opt-in per chat: /followups on)."""

    quiet_hours: Annotated[
        str,
        msgspec.Meta(
            pattern=r"^([01]\d|2[0-3]):[0-5]\d-([01]\d|2[0-3]):[0-5]\d$",
            description=(
                "No check-in is sent between these local times (HH:MM-HH:MM, the person's zone; it may cross "
                "midnight); one due inside them waits for their end."
            ),
        ),
    ] = "22:00-08:00"
    max_per_day: Annotated[NonNegativeInt, about("Check-ins one person gets in one local day, at most.")] = 2


class ReplicaConfig(Table):
    """Replication with Litestream (on when ASH_REPLICA_URL is set) and who the writer is."""

    endpoint: Annotated[str | None, about("An S3-compatible endpoint (MinIO, R2, Tigris, B2); unset: Amazon S3.")] = (
        None
    )
    region: Annotated[str, about("The bucket's region.")] = "us-east-1"
    sync_interval: Annotated[
        Positive, about("Seconds between uploads of new transactions: the recovery point a lost machine can cost.")
    ] = 1.0
    retention_hours: Annotated[Positive, about("Hours of history the replica keeps for point-in-time restores.")] = (
        168.0
    )
    writer: Annotated[
        str | None,
        about(
            "The Fly machine id of the one machine that owns the database; unset: every machine (a single one) "
            "is the writer, or, with Fly's PRIMARY_REGION set, the machines of that region."
        ),
    ] = None
