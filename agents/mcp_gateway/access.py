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

from agents.access.abilities import CALL_TOOL, USE_MCP, Refusal, read_permissions, refusal
from toolhub import rate_limits

from . import body_limits
from .credentials import authenticate_bearer

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


@dataclass(frozen=True)
class Admission:
    """What the database says of a /mcp request's bearer, read in one worker-thread hop (`admit`): its credential
    (None: unknown, expired or revoked), the rate limit it is past (if any), and why its owner and scopes may not use
    /mcp or may not ask a server for something (None where they may)."""

    credential: object | None
    exceeded: object | None = None
    use_refused: Refusal | None = None
    call_refused: Refusal | None = None

    @property
    def may_call(self) -> bool:
        """Whether the request may ask a server for something (a tools/call ...) once its body passes."""
        return self.credential is not None and self.exceeded is None and self.use_refused is self.call_refused is None


def admit(token: str, *, resource: str) -> Admission:
    """Authenticate the bearer, count it against its rate limits, and decide both of its abilities: one hop to the
    database's thread per request instead of four (the permissions are read once, the user object caches them)."""
    credential = authenticate_bearer(token, resource=resource)
    if credential is None:
        return Admission(None)
    exceeded = rate_limits.api_request(credential.api_key)
    if exceeded is not None:
        return Admission(credential, exceeded)
    scopes, holder = list(credential.scopes), "access token" if credential.oauth else "API key"
    read_permissions(credential.user)
    return Admission(
        credential,
        use_refused=refusal(credential.user, USE_MCP, scopes=scopes, holder=holder),
        call_refused=refusal(credential.user, CALL_TOOL, scopes=scopes, holder=holder),
    )


async def read_message(scope, receive):
    """(message, rejected, receive): a POST's JSON-RPC message (or batch) read and checked by
    agents.mcp_gateway.body_limits (size, JSON, depth, batch, strings), or why it was refused, and a receive that
    replays the body for the SDK; (None, None, receive) for other methods. Read before the bearer is admitted, so
    the call it carries can be planned in the admission's hop (agents.mcp_gateway.server); a refusal waits for
    `check`, which raises it after the answers that come first (401, 429, 403 for the owner)."""
    if scope.get("method") != "POST":
        return None, None, receive
    try:
        body, receive = await body_limits.read_body(scope, receive)
        return body_limits.check_body(body), None, receive
    except body_limits.McpInputRejected as rejected:
        return None, rejected, receive


def check(admission: Admission, message, rejected: body_limits.McpInputRejected | None) -> Denial | None:
    """None when the request may go to the SDK, else its Denial (403: the owner or the scopes); raises `rejected`
    (read_message's refusal of the body) once the owner may use /mcp.

    `admission` holds an API key's or an OAuth access token's refusals, decided alike (`admit`).
    """
    if admission.use_refused is not None:
        return forbidden(admission.use_refused)
    if rejected is not None:
        raise rejected
    ids = tool_call_ids(message)
    if ids and admission.call_refused is not None:
        return forbidden(admission.call_refused, ids[0])
    return None
