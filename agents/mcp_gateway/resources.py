"""Resources, resource templates and prompts of the MCP servers toolhub imports, served at /mcp (resources/list,
resources/templates/list, resources/read, prompts/list, prompts/get, completion/complete).

Which servers offer them (the policy rule): a server's resources, resource
templates and prompts are listed, read, got and completed through toolhub when
the server is enabled and at least one of the tools it serves now
(McpServer.tool_names) is enabled with an active policy. A server whose tools
an operator denies (every one without a policy, or with a draft or rejected
one) or that is disabled offers nothing: none of its resources or prompts is
listed, and asking for one is answered as for an unknown one. Reading a
resource, getting a prompt and completing need the key's right to call tools
(agents.mcp_gateway.access), as a tools/call does.

Names: a prompt keeps its server's name, as a tool does, unless a server
added before it (a lower id) offers a prompt of that name: then it is listed as
`<prefix>__<name>` with its server's prefix. A server added later never renames
an earlier server's prompt, and `<prefix>__<name>` is always understood, so a
name a client was given still works when the clash goes away. A resource keeps
its server's URI, so a link in a tool's result reads as it is; a read goes to
the offered server that lists the URI, else to the one with a resource template
matching it. A URI (or template) two servers claim is listed by neither and
reading it is refused naming both. An unknown URI or prompt name, or one of a
server that offers nothing, is a JSON-RPC error (-32602) saying so; a server's
own refusal keeps its code, with the server named.

Lists are asked live (what a server offers changes without a sync: session
resources, generated ones), kept LIST_SECONDS per server and kind in this
process (a server that cannot list is left out, and asked again after
UNREACHABLE_SECONDS). A server's resources or prompts list_changed notice drops its lists
and is passed on, while the server offers, to every session of this process
that listed that kind (on the session's standalone stream, so a client that
opened none, or a stateless one, hears nothing; it sees the change on its next
list). Never asks a server that does not offer, never lists what the rule hides.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import defaultdict
from functools import lru_cache

import mcp_types as types
from channels.db import database_sync_to_async
from mcp.shared.exceptions import MCPError
from mcp.shared.uri_template import InvalidUriTemplate, UriTemplate

from catalog.mcp_client.client import Endpoint, McpServerUnavailable, on_list_changed
from catalog.mcp_client.names import SEPARATOR
from catalog.mcp_client.resources import (
    EMPTY_COMPLETION,
    PROMPTS,
    RESOURCE_TEMPLATES,
    RESOURCES,
    UpstreamRefused,
    acomplete,
    aget_prompt,
    alist,
    aread_resource,
)
from catalog.models import McpServer, Tool, ToolPolicy

logger = logging.getLogger(__name__)

LIST_SECONDS = 30
UNREACHABLE_SECONDS = 5  # a server that could not list is not asked again for this long (each list would wait)
MAX_LISTENING_SESSIONS = 1000
RESOURCES_CHANGED = "notifications/resources/list_changed"
PROMPTS_CHANGED = "notifications/prompts/list_changed"


class NotOffered(Exception):
    """No server toolhub offers has it (unknown, or its server's tools are all denied); the message says which."""


# --- which servers offer (sync: ORM) ------------------------------------------------------------------


def offered_servers() -> list[McpServer]:
    """The enabled servers with at least one enabled tool with an active policy among the tools they serve now."""
    servers = list(McpServer.objects.filter(enabled=True).order_by("pk"))  # the first added keeps a prompt's name
    served = {name for server in servers for name in server.tool_names}
    allowed = set(
        Tool.objects.filter(name__in=served, enabled=True, policy__status=ToolPolicy.Status.ACTIVE).values_list(
            "name", flat=True
        )
    )
    return [server for server in servers if allowed.intersection(server.tool_names)]


# --- the lists, cached per server and kind ----------------------------------------------------------


class _Lists:
    def __init__(self):
        self._lists: dict[tuple[str, Endpoint], tuple[float, list[dict]]] = {}
        self._lock = threading.Lock()  # the client's loop thread drops lists when a server says they changed

    async def get(self, server: McpServer, kind: str, *, fresh: bool = False) -> list[dict]:
        key = (kind, Endpoint.of(server))
        with self._lock:
            kept = self._lists.get(key)
        if kept is not None and not fresh and kept[0] > time.monotonic():
            return kept[1]
        seconds = LIST_SECONDS
        try:
            items = await alist(server, kind)
        except (McpServerUnavailable, UpstreamRefused) as exc:  # one server down must not empty the others' lists
            logger.warning("MCP server %r: its %s are left out: %s", server.name, kind, exc)
            items, seconds = [], UNREACHABLE_SECONDS
        with self._lock:
            self._lists[key] = (time.monotonic() + seconds, items)
        return items

    def forget(self, server_name: str) -> None:
        with self._lock:
            for key in [key for key in self._lists if key[1].name == server_name]:
                del self._lists[key]

    def forget_all(self) -> None:
        with self._lock:
            self._lists.clear()


_lists = _Lists()


async def offered() -> list[McpServer]:
    """The servers whose resources and prompts the caller may see (offered_servers, off the event loop)."""
    return await database_sync_to_async(offered_servers)()


async def _all(kind: str, *, fresh: bool = False) -> list[tuple[McpServer, list[dict]]]:
    servers = await offered()
    lists = await asyncio.gather(*(_lists.get(server, kind, fresh=fresh) for server in servers))
    return list(zip(servers, lists, strict=True))


def _unambiguous(lists: list[tuple[McpServer, list[dict]]], key: str) -> list[tuple[McpServer, dict]]:
    """Each listed item with its server, without those whose `key` (URI, template) more than one server lists."""
    claims: dict[str, set[str]] = defaultdict(set)
    for server, items in lists:
        for item in items:
            claims[item[key]].add(server.name)
    for value, names in claims.items():
        if len(names) > 1:
            logger.warning("%s is listed by MCP servers %s; toolhub lists it for neither", value, sorted(names))
    return [(server, item) for server, items in lists for item in items if len(claims[item[key]]) == 1]


def prompt_name(server: McpServer, name: str) -> str:
    return f"{server.prefix}{SEPARATOR}{name}"


async def resources() -> list[dict]:
    return [item for _, item in _unambiguous(await _all(RESOURCES), "uri")]


async def resource_templates() -> list[dict]:
    return [item for _, item in _unambiguous(await _all(RESOURCE_TEMPLATES), "uriTemplate")]


def named_prompts(lists: list[tuple[McpServer, list[dict]]]) -> dict[str, tuple[McpServer, dict]]:
    """toolhub's name of each listed prompt -> (its server, the prompt as the server lists it).

    `lists` come in the order the servers were added: a prompt keeps its server's name unless an earlier server
    lists one of that name, then it is `<prefix>__<name>`. A name that is still taken (a server's own name looking
    like another's prefixed one) is left out, with a warning.
    """
    first_lister: dict[str, McpServer] = {}
    for server, items in lists:
        for item in items:
            first_lister.setdefault(item["name"], server)
    named: dict[str, tuple[McpServer, dict]] = {}
    for server, items in lists:
        for item in items:
            upstream = item["name"]
            name = upstream if first_lister[upstream] is server else prompt_name(server, upstream)
            if name in named:
                logger.warning("MCP server %r's prompt %r would be named %s, which is taken; toolhub lists it not",
                               server.name, upstream, name)  # fmt: skip
                continue
            named[name] = (server, item)
    return named


async def prompts() -> list[dict]:
    return [item | {"name": name} for name, (_, item) in named_prompts(await _all(PROMPTS)).items()]


# --- who owns what ------------------------------------------------------------------------------------


@lru_cache(maxsize=1024)
def _template(text: str) -> UriTemplate | None:
    try:
        return UriTemplate.parse(text)
    except (InvalidUriTemplate, ValueError):
        return None


def _matches(template: str, uri: str) -> bool:
    parsed = _template(template)
    try:
        return parsed is not None and parsed.match(uri) is not None
    except ValueError:
        return False


def _one(owners: dict[str, McpServer], what: str) -> McpServer | None:
    if len(owners) > 1:
        raise NotOffered(
            f"{what} is offered by more than one MCP server ({', '.join(sorted(owners))}); toolhub cannot tell "
            "which one to ask, so it asks neither."
        )
    return next(iter(owners.values()), None)


async def resource_owner(uri: str) -> McpServer:
    """The offered server to read `uri` from: the one that lists it, else the one with a template matching it.

    Lists are asked again once before the URI is called unknown (a tool may have just made it).
    """
    for fresh in (False, True):
        listed = {server.name: server for server, items in await _all(RESOURCES, fresh=fresh)
                  if any(item["uri"] == uri for item in items)}  # fmt: skip
        owner = _one(listed, f"Resource {uri}")
        if owner is None:
            templates = {server.name: server for server, items in await _all(RESOURCE_TEMPLATES, fresh=fresh)
                         if any(_matches(item["uriTemplate"], uri) for item in items)}  # fmt: skip
            owner = _one(templates, f"Resource {uri}")
        if owner is not None:
            return owner
    raise NotOffered(
        f"There is no resource {uri} among those toolhub offers: no MCP server whose tools policy allows "
        "lists it or has a resource template matching it."
    )


async def template_owner(uri_template: str) -> McpServer:
    owners = {server.name: server for server, items in await _all(RESOURCE_TEMPLATES)
              if any(item["uriTemplate"] == uri_template for item in items)}  # fmt: skip
    owner = _one(owners, f"Resource template {uri_template}")
    if owner is None:
        raise NotOffered(f"There is no resource template {uri_template} among those toolhub offers.")
    return owner


async def prompt_owner(name: str) -> tuple[McpServer, str]:
    """(the offered server of prompt `name`, the server's own name for it): `name` as listed, or any offered
    server's prompt named `<its prefix>__<its name>`."""
    lists = await _all(PROMPTS)
    listed = named_prompts(lists).get(name)
    if listed is not None:
        server, item = listed
        return server, item["name"]
    prefix, separator, upstream = name.partition(SEPARATOR)
    for server, items in lists if separator else ():
        if server.prefix == prefix and any(item["name"] == upstream for item in items):
            return server, upstream
    raise NotOffered(
        f"There is no prompt named {name} among those toolhub offers (prompts keep their server's name, or are "
        f"named <server prefix>{SEPARATOR}<name> when an earlier server has one of that name; only servers whose "
        "tools policy allows offer prompts)."
    )


# --- the handlers of toolhub's MCP server ------------------------------------------------------------


def refused_error(exc: Exception, server: McpServer | None = None) -> MCPError:
    if isinstance(exc, NotOffered):
        return MCPError(code=types.INVALID_PARAMS, message=str(exc))
    if isinstance(exc, UpstreamRefused):
        return MCPError(code=exc.code, message=f"MCP server {server.name!r} refused: {exc.message}")
    return MCPError(code=types.INTERNAL_ERROR, message=str(exc))


async def on_list_resources(ctx, params) -> types.ListResourcesResult:
    listen(ctx, RESOURCES_CHANGED)
    return types.ListResourcesResult.model_validate({"resources": await resources()})


async def on_list_resource_templates(ctx, params) -> types.ListResourceTemplatesResult:
    listen(ctx, RESOURCES_CHANGED)
    return types.ListResourceTemplatesResult.model_validate({"resourceTemplates": await resource_templates()})


async def on_read_resource(ctx, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
    server = None
    try:
        server = await resource_owner(str(params.uri))
        return types.ReadResourceResult.model_validate(await aread_resource(server, str(params.uri)))
    except (NotOffered, UpstreamRefused, McpServerUnavailable) as exc:
        raise refused_error(exc, server) from None


async def on_list_prompts(ctx, params) -> types.ListPromptsResult:
    listen(ctx, PROMPTS_CHANGED)
    return types.ListPromptsResult.model_validate({"prompts": await prompts()})


async def on_get_prompt(ctx, params: types.GetPromptRequestParams) -> types.GetPromptResult:
    server = None
    try:
        server, upstream = await prompt_owner(params.name)
        return types.GetPromptResult.model_validate(await aget_prompt(server, upstream, params.arguments))
    except (NotOffered, UpstreamRefused, McpServerUnavailable) as exc:
        raise refused_error(exc, server) from None


async def on_completion(ctx, params: types.CompleteRequestParams) -> types.CompleteResult:
    """Relayed to the server of the prompt or template; a server that cannot complete gives an empty completion."""
    ref = params.ref.model_dump(mode="json", by_alias=True, exclude_none=True)
    try:
        if ref["type"] == "ref/prompt":
            server, ref["name"] = await prompt_owner(ref["name"])
        else:
            server = await template_owner(ref["uri"])
    except NotOffered as exc:
        raise refused_error(exc) from None
    argument = params.argument.model_dump(mode="json", by_alias=True)
    context = params.context.model_dump(mode="json", by_alias=True) if params.context else None
    try:
        completed = await acomplete(server, ref, argument, context)
    except (UpstreamRefused, McpServerUnavailable) as exc:
        logger.info("MCP server %r could not complete %s: %s", server.name, ref, exc)
        completed = EMPTY_COMPLETION
    return types.CompleteResult.model_validate(completed)


# --- list changes: passed on to the sessions that listed ----------------------------------------------


class _Listeners:
    """The sessions of this process that listed resources or prompts: Mcp-Session-Id -> (session, methods)."""

    def __init__(self):
        self.sessions: dict[str, tuple[object, set[str]]] = {}
        self.loop: asyncio.AbstractEventLoop | None = None

    def add(self, session_id: str, session, method: str) -> None:
        self.loop = asyncio.get_running_loop()
        _, methods = self.sessions.pop(session_id, (None, set()))
        self.sessions[session_id] = (session, methods | {method})  # the most recent last
        while len(self.sessions) > MAX_LISTENING_SESSIONS:
            self.sessions.pop(next(iter(self.sessions)))

    async def tell(self, server_name: str, method: str) -> None:
        """Pass `method` on to the sessions that listed its kind, if the server offers (on this loop)."""
        if not any(server.name == server_name for server in await offered()):
            return
        notification = {RESOURCES_CHANGED: types.ResourceListChangedNotification(),
                        PROMPTS_CHANGED: types.PromptListChangedNotification()}[method]  # fmt: skip
        for session_id, (session, methods) in list(self.sessions.items()):
            if method not in methods:
                continue
            try:
                await session.send_notification(notification)
            except Exception as exc:  # the session ended, or its client opened no stream for it
                logger.debug("dropping MCP session %s from list-change notices: %s", session_id, exc)
                self.sessions.pop(session_id, None)


_listeners = _Listeners()


def listen(ctx, method: str) -> None:
    request = getattr(ctx, "request", None)
    session_id = request.headers.get("mcp-session-id") if request is not None else None
    if session_id:
        _listeners.add(session_id, ctx.session, method)


def _upstream_changed(server_name: str, method: str) -> None:
    """A server's list changed (on the client's loop thread): drop its lists, tell the sessions on theirs."""
    _lists.forget(server_name)
    loop = _listeners.loop
    if loop is None or loop.is_closed():
        return
    try:
        asyncio.run_coroutine_threadsafe(_listeners.tell(server_name, method), loop)
    except RuntimeError:  # the loop stopped meanwhile
        pass


on_list_changed(_upstream_changed)
