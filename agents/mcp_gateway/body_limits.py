"""Bounds on what a /mcp request body may be, checked while it is read and before the MCP SDK parses it.

Each refusal is a JSON-RPC error in bounded time, never a 500: a body over
TOOLHUB_MCP_MAX_BODY_BYTES is HTTP 413 (judged from Content-Length unread, else
while reading: the rest is never buffered), a body that is not JSON is 400 with
-32700 (parse error), JSON nested deeper than TOOLHUB_MCP_MAX_JSON_DEPTH (counted
on the raw bytes, before any recursive parser sees them) or a batch of more than
TOOLHUB_MCP_MAX_BATCH messages is 400 with -32600 (invalid request), and a NUL
byte or a lone surrogate in any string or key is 400 with -32602 (invalid params)
naming where. Uses the /v1 checks of agents.openai_api.body_limits for depth and strings.
This module only checks; the SDK parses and answers what passes.
"""

import json
from dataclasses import dataclass

from django.conf import settings

from agents.openai_api.body_limits import json_depth, unstorable_field

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602


@dataclass
class McpInputRejected(Exception):
    """The answer to a body refused here: HTTP status and a JSON-RPC error (with the request's id when known)."""

    status: int
    code: int
    message: str
    request_id: object = None

    def payload(self) -> dict:
        return {"jsonrpc": "2.0", "id": self.request_id, "error": {"code": self.code, "message": self.message}}


def _declared_length(scope) -> int:
    for name, value in scope.get("headers", ()):
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return 0
    return 0


async def read_body(scope, receive):
    """The body, read up to the cap, and a receive that replays it and then passes on the client's messages.

    Raises McpInputRejected (413) as soon as the body says, or turns out, to be over the cap.
    """
    cap = settings.TOOLHUB_MCP_MAX_BODY_BYTES
    too_large = McpInputRejected(413, INVALID_REQUEST, f"The request body is over {cap} bytes.")
    if _declared_length(scope) > cap:
        raise too_large
    first, chunks, size = None, [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            first = message  # the client went away: the SDK sees that
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > cap:
            raise too_large
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    pending = [first or {"type": "http.request", "body": body, "more_body": False}]

    async def replay():
        return pending.pop() if pending else await receive()

    return body, replay


def check_body(body: bytes):
    """The parsed JSON-RPC message (or batch) once `body` is within every bound; McpInputRejected otherwise."""
    limit = settings.TOOLHUB_MCP_MAX_JSON_DEPTH
    if json_depth(body) > limit:
        raise McpInputRejected(400, INVALID_REQUEST, f"The request body nests JSON deeper than {limit} levels.")
    try:
        message = json.loads(body)
    except ValueError as error:  # UnicodeDecodeError is a ValueError too
        raise McpInputRejected(400, PARSE_ERROR, f"Parse error: the body is not valid JSON ({error}).") from None
    batch = settings.TOOLHUB_MCP_MAX_BATCH
    if isinstance(message, list) and len(message) > batch:
        raise McpInputRejected(400, INVALID_REQUEST, f"The batch has {len(message)} messages; at most {batch}.")
    field = unstorable_field(message, "")
    if field is not None:
        first = message[0] if isinstance(message, list) and message else message
        request_id = first.get("id") if isinstance(first, dict) else None
        if (
            not isinstance(request_id, str | int)
            or isinstance(request_id, bool)
            or unstorable_field(request_id, "id") is not None
        ):
            request_id = None
        raise McpInputRejected(
            400, INVALID_PARAMS, f"{field} contains a NUL byte or a lone surrogate, which is not accepted.", request_id
        )
    return message
