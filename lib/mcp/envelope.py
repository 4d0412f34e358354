"""Each JSON-RPC message checked before the MCP SDK reads it, so a bad one gets the error the
specifications name, over HTTP and stdio alike.

JSON-RPC 2.0 (section 5.1) and MCP's base protocol: a body that is not JSON is a parse error
(-32700, id null); anything that is not one request, notification or response object is an
invalid request (-32600): no `"jsonrpc": "2.0"`, a method that is not a string, an id that is
null (MCP: "the ID MUST NOT be null"), a boolean or a fraction, params that are neither an object
nor an array. Params given as an array are a well-formed request whose params MCP cannot take
(-32602, MCP's params are named). Without this check the SDK answered most of these -32602 and
took `"id": null` for a notification, which gets no answer at all.

A JSON array is a batch. Batches exist only in MCP 2025-03-26 (2025-06-18 removed them), and this
server does not offer 2025-03-26 (`NOT_OFFERED`): a client asking for it in `initialize` is
answered with the newest version instead, as the lifecycle rules allow, and a batch is refused as
an invalid request. Supporting batches would mean running each message of one stateless request
separately and answering them together, for clients that the SDKs stopped writing in mid-2025.

Plain Python, no SDK: it is the first thing /mcp and `ash mcp serve` do with what they read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
# Protocol versions the SDK knows but this server does not offer (see the module docstring).
NOT_OFFERED = frozenset({"2025-03-26"})
BATCH_REFUSED = (
    "JSON-RPC batches are not accepted: they belong to MCP 2025-03-26, which this server does not "
    "offer (2025-06-18 removed them); send one message per request"
)


@dataclass(frozen=True)
class Problem:
    """Why a message is refused, as the JSON-RPC error it gets."""

    code: int
    message: str
    id: str | int | None = None

    def response(self) -> dict[str, Any]:
        """The JSON-RPC error response object."""
        return {"jsonrpc": "2.0", "id": self.id, "error": {"code": self.code, "message": self.message}}

    def encoded(self) -> bytes:
        return json.dumps(self.response(), separators=(",", ":")).encode()


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def check(raw: bytes | str) -> dict[str, Any] | Problem:
    """The message in `raw` when it is one well-formed JSON-RPC message, else the Problem to answer."""
    try:
        message = json.loads(raw)
    except (ValueError, RecursionError):
        return Problem(PARSE_ERROR, "Parse error: the message is not valid JSON")
    if isinstance(message, list):
        return Problem(INVALID_REQUEST, BATCH_REFUSED)
    if not isinstance(message, dict):
        return Problem(INVALID_REQUEST, "Invalid request: a JSON-RPC message is a JSON object")
    request_id = message.get("id")
    answer_id = request_id if _valid_id(request_id) else None
    if message.get("jsonrpc") != "2.0":
        return Problem(INVALID_REQUEST, 'Invalid request: "jsonrpc" must be "2.0"', answer_id)
    if "id" in message and not _valid_id(request_id):
        return Problem(INVALID_REQUEST, "Invalid request: an id is a string or an integer, never null", None)
    if "method" in message:
        if not isinstance(message["method"], str) or not message["method"]:
            return Problem(INVALID_REQUEST, 'Invalid request: "method" must be a non-empty string', answer_id)
        params = message.get("params")
        if isinstance(params, list):
            return Problem(INVALID_PARAMS, "Invalid params: MCP takes params as an object (by name)", answer_id)
        if "params" in message and not isinstance(params, dict):
            return Problem(INVALID_REQUEST, 'Invalid request: "params" must be an object', answer_id)
        return message
    # No method: a response to a request of ours (this server sends none, but may one day).
    if "id" not in message or ("result" in message) == ("error" in message):
        return Problem(
            INVALID_REQUEST, "Invalid request: neither a request (method) nor a response (id and result or error)"
        )
    return message


def is_request(message: dict[str, Any]) -> bool:
    """A request expects an answer; a notification or a response does not."""
    return "method" in message and "id" in message


def offered(message: dict[str, Any], latest: str) -> dict[str, Any]:
    """`message`, except that an `initialize` asking for a version this server does not offer asks
    for `latest` instead, so the answer names a version the server does offer."""
    params = message.get("params")
    if message.get("method") != "initialize" or not isinstance(params, dict):
        return message
    if params.get("protocolVersion") not in NOT_OFFERED:
        return message
    return {**message, "params": {**params, "protocolVersion": latest}}
