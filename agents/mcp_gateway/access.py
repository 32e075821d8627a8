"""Authorization of /mcp requests: agents.access.abilities applied to JSON-RPC, before the MCP SDK sees the request.

A key (or OAuth access token) whose owner may not use /mcp (catalog.view_tool) or that has neither the
mcp nor the read scope gets HTTP 403 for every request. A `tools/call` from a
key that may not call tools (agents.add_turn and the mcp scope) gets HTTP 403
with a JSON-RPC error carrying the request's id, and the SDK never runs it;
so do the other requests an MCP server answers for the caller
(resources/read, resources/subscribe, prompts/get, completion/complete:
ASKS_A_SERVER). Listing
stays allowed. When the key's scopes were the reason, the answer
carries `WWW-Authenticate: Bearer error="insufficient_scope", scope="..."` as
MCP's authorization spec asks. A POST body is read and checked by
agents.mcp_gateway.body_limits (size, JSON, depth, batch, strings) before the SDK sees it.
"""

from dataclasses import dataclass

from channels.db import database_sync_to_async

from agents.access.abilities import CALL_TOOL, USE_MCP, Refusal, refusal

from . import body_limits

FORBIDDEN = -32003  # JSON-RPC implementation-defined server error (-32000..-32099): not allowed for this key
RATE_LIMITED = -32029  # the same range: past the key's or its owner's requests per minute (HTTP 429)
TOOLS_CALL = "tools/call"
ASKS_A_SERVER = frozenset({TOOLS_CALL, "resources/read", "resources/subscribe", "prompts/get", "completion/complete"})


@dataclass(frozen=True)
class Denial:
    """An answer sent instead of the SDK's: HTTP status, JSON-RPC error body, extra headers."""

    status: int
    payload: dict
    headers: tuple[tuple[bytes, bytes], ...] = ()


def jsonrpc_error(request_id, code: int, message: str) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def forbidden(refused: Refusal, request_id=None) -> Denial:
    headers = ()
    if refused.missing_scopes:
        challenge = f'Bearer error="insufficient_scope", scope="{" ".join(sorted(refused.missing_scopes))}"'
        headers = ((b"www-authenticate", challenge.encode()),)
    return Denial(403, jsonrpc_error(request_id, FORBIDDEN, refused.message), headers)


def tool_call_ids(message) -> list:
    """Ids of the ASKS_A_SERVER requests (`tools/call`, ...) in a parsed JSON-RPC message (or batch); [] for others."""
    messages = message if isinstance(message, list) else [message]
    return [m.get("id") for m in messages if isinstance(m, dict) and m.get("method") in ASKS_A_SERVER]


async def check(credential, scope, receive):
    """(None, receive) when the request may go to the SDK (receive replays a body read here); else (Denial, _).

    `credential` is an agents.mcp_gateway.credentials.Credential: an API key's or an OAuth access token's, checked
    alike. A POST body over agents.mcp_gateway.body_limits's bounds raises its McpInputRejected.
    """
    user, scopes = credential.user, list(credential.scopes)
    holder = "access token" if credential.oauth else "API key"
    refused = await database_sync_to_async(refusal)(user, USE_MCP, scopes=scopes, holder=holder)
    if refused is not None:
        return forbidden(refused), receive
    if scope.get("method") != "POST":
        return None, receive
    body, receive = await body_limits.read_body(scope, receive)
    ids = tool_call_ids(body_limits.check_body(body))
    if ids:
        refused = await database_sync_to_async(refusal)(user, CALL_TOOL, scopes=scopes, holder=holder)
        if refused is not None:
            return forbidden(refused, ids[0]), receive
    return None, receive
