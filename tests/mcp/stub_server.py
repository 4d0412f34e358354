"""A small MCP server written with the SDK's own MCPServer, for the client tests.

Run as `python stub_server.py stdio [--linger]`, or `python stub_server.py http PORT TOKEN`
(Streamable HTTP at /mcp, answering 401 unless `Authorization: Bearer TOKEN` is sent). With
`--linger` the process does not exit when its stdin closes (a server that ignores EOF), so only
a signal ends it. Any further argument is ignored (tests use one to find the process).
"""

from __future__ import annotations

import json
import os
import sys
import time

import anyio
from mcp.server.mcpserver import MCPServer

server = MCPServer("stub")
calls = 0


@server.tool()
def count() -> str:
    """How many times this tool was called in this process, this call included."""
    global calls
    calls += 1
    return str(calls)


@server.tool()
def die(note: str) -> str:
    """Write a line to the file `note`, then end this process in the middle of the call."""
    with open(note, "a", encoding="utf-8") as file:
        file.write("called\n")
    os._exit(1)


@server.tool()
def pid() -> str:
    """This server process's id."""
    return str(os.getpid())


# Names the model APIs refuse once prefixed: a dot, and a name too long for 64 characters.
@server.tool(name="files.read")
def files_read(path: str) -> str:
    """Pretend to read a file."""
    return f"read {path}"


@server.tool(name="a_tool_whose_name_is_far_too_long_to_fit_in_sixty_four_characters")
def long_named() -> str:
    """A tool with a long name."""
    return "long name reached"


@server.tool()
def shout(text: str) -> str:
    """Return the text in capitals."""
    return text.upper() + "!"


@server.tool()
def environment() -> str:
    """Every environment variable this server process sees, as JSON."""
    return json.dumps(dict(os.environ))


@server.tool()
def long_output(characters: int) -> str:
    """A text of the given length."""
    return "x" * characters


@server.tool()
async def hang() -> str:
    """Never answers."""
    await anyio.sleep(3600)
    return "too late"


def _with_token(app, token: str):
    async def guarded(scope, receive, send):
        if scope["type"] == "http":
            sent = dict(scope["headers"]).get(b"authorization", b"").decode()
            if sent != f"Bearer {token}":
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b""})
                return
        await app(scope, receive, send)

    return guarded


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run("stdio")
        while "--linger" in sys.argv:
            time.sleep(3600)
    else:
        import uvicorn

        port, token = int(sys.argv[2]), sys.argv[3]
        app = server.streamable_http_app(json_response=True, stateless_http=True)
        uvicorn.run(_with_token(app, token), host="127.0.0.1", port=port, log_level="warning")
