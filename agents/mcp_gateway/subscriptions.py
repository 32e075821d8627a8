"""resources/subscribe and resources/unsubscribe at toolhub's /mcp, relayed to the MCP server that serves the URI,
and that server's notifications/resources/updated passed on to the sessions that subscribed.

A subscription goes to the offered server that lists the URI or has a
template matching it (agents.mcp_gateway.resources.resource_owner: the same rule as a
read, so a URI of a server whose tools policy denies is refused as unknown).
toolhub's one connection to that server subscribes to the URI on behalf of
every session of this process that asked: the server is asked on each
session's subscribe (it keeps a set, and a reopened connection starts without
any), and told to unsubscribe when the last of them unsubscribes or can no
longer be reached. An update is passed on to each session that subscribed to
that URI on that server, on its standalone stream, while the server still
offers; never to another session, never for a URI nobody here subscribed to.
A server that offers no subscriptions makes subscribing a JSON-RPC error
(-32602) saying so. Unsubscribing what the session did not subscribe to
succeeds and changes nothing. Subscribing needs the right to call tools
(agents.mcp_gateway.access), as resources/read does. A process keeps at most
MAX_SUBSCRIPTIONS (session, URI) pairs: past it the oldest is dropped (a
session that ended without unsubscribing is dropped this way, or when a send
to it fails).
"""

from __future__ import annotations

import asyncio
import logging

import mcp_types as types
from channels.db import database_sync_to_async
from mcp.shared.exceptions import MCPError

from catalog.mcp_client.client import McpServerUnavailable, on_resource_updated
from catalog.mcp_client.resources import UpstreamRefused, asubscribe, aunsubscribe
from catalog.models import McpServer

from .resources import NotOffered, offered, refused_error, resource_owner

logger = logging.getLogger(__name__)

MAX_SUBSCRIPTIONS = 10_000  # (session, server, URI) subscriptions one process keeps


class _Subscriptions:
    """(server name, URI) -> the sessions of this process subscribed to it (Mcp-Session-Id -> the session to send
    to), and the loop they live on."""

    def __init__(self):
        self.sessions: dict[tuple[str, str], dict[str, object]] = {}
        self.loop: asyncio.AbstractEventLoop | None = None

    def count(self) -> int:
        return sum(len(sessions) for sessions in self.sessions.values())

    def add(self, key: tuple[str, str], session_id: str, session) -> list[tuple[str, str]]:
        """Subscribe the session to `key`; returns the keys nobody is subscribed to any more after the oldest
        subscriptions were dropped to stay within MAX_SUBSCRIPTIONS."""
        self.loop = asyncio.get_running_loop()
        self.sessions.setdefault(key, {})[session_id] = session
        emptied = []
        while self.count() > MAX_SUBSCRIPTIONS:
            oldest = next(iter(self.sessions))
            if self.remove(oldest, next(iter(self.sessions[oldest]))):
                emptied.append(oldest)
        return emptied

    def remove(self, key: tuple[str, str], session_id: str) -> bool:
        """Drop the session from `key`; True when nobody is left subscribed to it."""
        sessions = self.sessions.get(key, {})
        sessions.pop(session_id, None)
        if sessions:
            return False
        self.sessions.pop(key, None)
        return True

    def keys_of(self, session_id: str, uri: str) -> list[tuple[str, str]]:
        return [key for key, sessions in self.sessions.items() if key[1] == uri and session_id in sessions]


_subscriptions = _Subscriptions()


def _session_id(ctx) -> str:
    """The request's Mcp-Session-Id (toolhub's /mcp is stateful: the SDK has checked it by now)."""
    return ctx.request.headers["mcp-session-id"]


async def on_subscribe_resource(ctx, params: types.SubscribeRequestParams) -> types.EmptyResult:
    uri = str(params.uri)
    server = None
    try:
        server = await resource_owner(uri)
        if not await asubscribe(server, uri):
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"MCP server {server.name!r}, which serves {uri}, offers no subscriptions to its resources.",
            )
    except (NotOffered, UpstreamRefused, McpServerUnavailable) as exc:
        raise refused_error(exc, server) from None
    for nobody_left in _subscriptions.add((server.name, uri), _session_id(ctx), ctx.session):
        await _unsubscribe_upstream(*nobody_left)
    return types.EmptyResult()


async def on_unsubscribe_resource(ctx, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    uri = str(params.uri)
    session_id = _session_id(ctx)
    for key in _subscriptions.keys_of(session_id, uri):
        if _subscriptions.remove(key, session_id):
            await _unsubscribe_upstream(*key)
    return types.EmptyResult()


async def _unsubscribe_upstream(server_name: str, uri: str) -> None:
    """Nobody here wants `uri` any more: tell its server (best effort: a server that is gone forgot already)."""
    server = await database_sync_to_async(McpServer.objects.filter(name=server_name).first)()
    if server is None or (server_name, uri) in _subscriptions.sessions:  # a session subscribed again meanwhile
        return
    try:
        await aunsubscribe(server, uri)
    except (UpstreamRefused, McpServerUnavailable) as exc:
        logger.info("MCP server %r: unsubscribing from %s failed: %s", server_name, uri, exc)


async def _tell(server_name: str, uri: str) -> None:
    """Pass a server's update of `uri` on to the sessions subscribed to it there, while the server offers."""
    key = (server_name, uri)
    if key not in _subscriptions.sessions:
        return
    if not any(server.name == server_name for server in await offered()):
        return
    notification = types.ResourceUpdatedNotification(params=types.ResourceUpdatedNotificationParams(uri=uri))
    for session_id, session in list(_subscriptions.sessions.get(key, {}).items()):
        try:
            await session.send_notification(notification)
        except Exception as exc:  # the session ended, or its client opened no stream for it
            logger.debug("dropping MCP session %s's subscription to %s: %s", session_id, uri, exc)
            if _subscriptions.remove(key, session_id):
                await _unsubscribe_upstream(server_name, uri)


def _upstream_updated(server_name: str, uri: str) -> bool:
    """A server says `uri` changed (on the client's loop thread): tell the subscribed sessions on their loop.

    False when no session here subscribed to it (catalog.mcp_client.client logs it as unasked)."""
    loop = _subscriptions.loop
    if (server_name, uri) not in _subscriptions.sessions or loop is None or loop.is_closed():
        return False
    try:
        asyncio.run_coroutine_threadsafe(_tell(server_name, uri), loop)
    except RuntimeError:  # the loop stopped meanwhile
        return False
    return True


on_resource_updated(_upstream_updated)
