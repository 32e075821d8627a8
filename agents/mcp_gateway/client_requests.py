"""What an upstream MCP server asks during a tools/call made through /mcp, relayed to the /mcp client that made it.

The call is made for a catalog.mcp_client.callers.Caller: the key's user and the client's Mcp-Session-Id (which
choose the upstream connection: shared, per user or per session), and two answers. An elicitation/create goes to
the client as its own elicitation/create, on the call's stream, when the client declared the elicitation
capability (and, for a URL elicitation, URL mode); a sampling/createMessage goes to the client as its own
sampling/createMessage when it declared sampling: the client's model answers, at its user's cost, so toolhub spends
no tokens of its own here (catalog.mcp_client.callers bounds how many a call may ask and their maxTokens). A client
that did not declare the capability makes the server get an error saying so. The client's answer goes back to the
server as it is. Never sends a request to a client other than the caller.
"""

from __future__ import annotations

import asyncio

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata

from catalog.mcp_client.callers import Caller

from .progress import session_id


class ClientAsker:
    """Asks the /mcp client of one tools/call (its request context `ctx`), on the client's own event loop."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.loop = asyncio.get_running_loop()

    def caller(self, user_id: int | None) -> Caller:
        session = session_id(self.ctx)
        return Caller(user_id=user_id, session_key=f"mcp:{session}" if session else "", elicit=self.elicit,
                      sample=self.sample)  # fmt: skip

    def _declared(self) -> types.ClientCapabilities:
        return self.ctx.session.client_capabilities or types.ClientCapabilities()

    async def _ask(self, request, result_type):
        """Send `request` to the client, related to its call, and wait for its answer (on the MCP client's loop)."""
        metadata = ServerMessageMetadata(related_request_id=self.ctx.request_id)
        sent = self.ctx.session.send_request(request, result_type, metadata=metadata)
        try:
            return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(sent, self.loop))
        except MCPError as refused:  # the client's own error (or no way to reach it) goes back as it is
            return refused.error

    async def elicit(self, params: types.ElicitRequestParams, seconds: float) -> types.ElicitResult | types.ErrorData:
        """Relayed to the client as it is; the tool call's time (`seconds`) bounds its answer (the MCP client's)."""
        declared = self._declared().elicitation
        if declared is None:
            return types.ErrorData(code=types.INVALID_REQUEST, message=(
                "toolhub declined the elicitation: the MCP client that made this call did not declare the "
                "elicitation capability."))  # fmt: skip
        if isinstance(params, types.ElicitRequestURLParams) and declared.url is None:
            return types.ErrorData(code=types.INVALID_REQUEST, message=(
                "toolhub declined the elicitation: the MCP client that made this call does not accept URL "
                "elicitations."))  # fmt: skip
        return await self._ask(types.ElicitRequest(params=params), types.ElicitResult)

    async def sample(self, params: types.CreateMessageRequestParams) -> types.CreateMessageResult | types.ErrorData:
        if self._declared().sampling is None:
            return types.ErrorData(code=types.INVALID_REQUEST, message=(
                "toolhub declined the sampling request: the MCP client that made this call did not declare the "
                "sampling capability."))  # fmt: skip
        return await self._ask(types.CreateMessageRequest(params=params), types.CreateMessageResult)
