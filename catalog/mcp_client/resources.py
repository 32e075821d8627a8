"""Resources, resource templates, prompts and completions of MCP servers, asked live over catalog.mcp_client.client's
connections (for async callers: toolhub's /mcp relays them), and subscriptions to a server's resources.

A server that did not offer a capability in its handshake is not asked for it
(its list is empty, a completion is empty). What a server answers is passed on
as MCP JSON, as it sent it. A server that cannot be reached raises
McpServerUnavailable; one that refuses a request raises UpstreamRefused with its
own error code and message. Lists follow the server's pages up to
TOOLHUB_MCP_MAX_TOOLS items. Never touches the database, never decides who may
see what (agents.mcp_gateway.resources does).
"""

from __future__ import annotations

import asyncio

from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    EmptyResult,
    PaginatedRequestParams,
    PromptReference,
    ResourceTemplateReference,
    SubscribeRequest,
    SubscribeRequestParams,
    UnsubscribeRequest,
    UnsubscribeRequestParams,
)

from .client import (
    _MAX_LIST_PAGES,
    Endpoint,
    McpServerUnavailable,
    _loop_thread,
    _problem,
    max_tools,
    mcp_timeout,
)

RESOURCES = "resources"
RESOURCE_TEMPLATES = "resourceTemplates"
PROMPTS = "prompts"
# kind -> (the capability that offers it, the ClientSession method that lists one page)
_LISTS = {
    RESOURCES: ("resources", "list_resources"),
    RESOURCE_TEMPLATES: ("resources", "list_resource_templates"),
    PROMPTS: ("prompts", "list_prompts"),
}
EMPTY_COMPLETION = {"completion": {"values": [], "hasMore": False}}


class UpstreamRefused(Exception):
    """The server answered the request with a JSON-RPC error; `code` and `message` are its own."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code, self.message = code, message


def _wire(model) -> dict:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def _session(server, timeout: float):
    problem = _problem(server)
    if problem:
        raise McpServerUnavailable(problem)
    connection = _loop_thread().connection(Endpoint.of(server), timeout)
    return connection, await connection.ready_session(timeout)


async def _ask(server, work, what: str):
    """Run `work(connection, session)` on the client's loop thread within the timeout; errors as documented."""
    timeout = mcp_timeout()
    label = f"MCP server {server.name!r}"

    async def run():
        connection, session = await _session(server, timeout)
        try:
            async with asyncio.timeout(timeout):
                return await work(connection, session)
        except TimeoutError:
            raise McpServerUnavailable(f"{label} did not answer {what} within {timeout:g} s.") from None
        except MCPError as exc:
            if exc.error.code == CONNECTION_CLOSED:
                connection.stop()
                raise McpServerUnavailable(f"{label} closed the connection while answering {what}.") from None
            raise UpstreamRefused(exc.error.code, exc.error.message) from None
        except (McpServerUnavailable, UpstreamRefused):
            raise
        except Exception as exc:  # a malformed answer
            message = f"{label} gave an invalid answer to {what}: {type(exc).__name__}: {exc}"
            raise McpServerUnavailable(message) from exc

    return await asyncio.wrap_future(_loop_thread().submit(run()))


def _offers(connection, capability: str) -> bool:
    return connection.capabilities is not None and getattr(connection.capabilities, capability) is not None


async def alist(server, kind: str) -> list[dict]:
    """Everything of `kind` (RESOURCES, RESOURCE_TEMPLATES, PROMPTS) the server lists now, as MCP JSON."""
    capability, method = _LISTS[kind]
    limit = max_tools()

    async def work(connection, session):
        if not _offers(connection, capability):
            return []
        items, cursor = [], None
        for _ in range(_MAX_LIST_PAGES):
            page = await getattr(session, method)(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
            items += [_wire(item) for item in getattr(page, _field(kind))]
            if len(items) > limit:
                raise McpServerUnavailable(f"MCP server {server.name!r} lists more than {limit:,} {kind}.")
            cursor = page.next_cursor
            if not cursor:
                return items
        raise McpServerUnavailable(f"MCP server {server.name!r} listed more than {_MAX_LIST_PAGES} pages of {kind}.")

    return await _ask(server, work, f"a list of its {kind}")


def _field(kind: str) -> str:
    return {RESOURCES: "resources", RESOURCE_TEMPLATES: "resource_templates", PROMPTS: "prompts"}[kind]


async def aread_resource(server, uri: str) -> dict:
    """The server's ReadResourceResult for `uri`, as MCP JSON."""

    async def work(connection, session):
        return _wire(await session.read_resource(uri))

    return await _ask(server, work, f"resources/read of {uri}")


async def aget_prompt(server, name: str, arguments: dict[str, str] | None) -> dict:
    """The server's GetPromptResult for its prompt `name` (the server's own name), as MCP JSON."""

    async def work(connection, session):
        return _wire(await session.get_prompt(name, arguments))

    return await _ask(server, work, f"prompts/get of {name}")


async def acomplete(server, ref: dict, argument: dict, context: dict | None) -> dict:
    """The server's CompleteResult (MCP JSON) for `ref` (a prompt, by the server's own name, or a resource
    template), or an empty completion when the server offers no completions."""
    reference = PromptReference(**ref) if ref.get("type") == "ref/prompt" else ResourceTemplateReference(**ref)

    async def work(connection, session):
        if not _offers(connection, "completions"):
            return EMPTY_COMPLETION
        return _wire(await session.complete(reference, argument, (context or {}).get("arguments")))

    return await _ask(server, work, "completion/complete")


def _subscribable(connection) -> bool:
    return _offers(connection, "resources") and bool(connection.capabilities.resources.subscribe)


async def asubscribe(server, uri: str) -> bool:
    """Subscribe toolhub's connection to `server` to `uri` (again: a server keeps a set, and a reopened connection
    starts without); its resources/updated notices then reach catalog.mcp_client.client.on_resource_updated's listeners.
    False when the server offers no subscriptions (nothing was asked)."""

    async def work(connection, session):
        if not _subscribable(connection):
            return False
        # Sent as a plain request: the SDK's helper warns that 2026-07-28 servers use subscriptions/listen instead.
        await session.send_request(SubscribeRequest(params=SubscribeRequestParams(uri=uri)), EmptyResult)
        return True

    return await _ask(server, work, f"resources/subscribe of {uri}")


async def aunsubscribe(server, uri: str) -> None:
    """Tell `server` that toolhub no longer wants updates of `uri` (nothing when it offers no subscriptions)."""

    async def work(connection, session):
        if _subscribable(connection):
            await session.send_request(UnsubscribeRequest(params=UnsubscribeRequestParams(uri=uri)), EmptyResult)

    await _ask(server, work, f"resources/unsubscribe of {uri}")
