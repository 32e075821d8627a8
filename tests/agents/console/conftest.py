"""The console's WebSocket tests: communicators over the route table, waiting long enough on a loaded host."""

import pytest_asyncio
from asgiref.sync import sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.db import connections

from agents.console.websocket_urls import websocket_urlpatterns

# Seconds a socket waits for what a test expects to arrive: channels' default (1 s) was too short on a loaded two-core
# host for a turn's events to render and fan out (a fast-stage run failed on it). Waits for nothing stay short.
ARRIVAL = 10


class Socket(WebsocketCommunicator):
    async def connect(self, timeout=ARRIVAL):
        return await super().connect(timeout)

    async def receive_from(self, timeout=ARRIVAL):
        return await super().receive_from(timeout)


@pytest_asyncio.fixture
async def communicator():
    """Makes communicators for the route table alone (the test puts the user in the scope as AuthMiddlewareStack
    would) and disconnects each one still running before the test's loop closes: a consumer left to the loop's
    teardown is cancelled inside the Redis layer's receive, which can hang the teardown."""
    made = []

    def make(path: str, user) -> Socket:
        socket = Socket(URLRouter(websocket_urlpatterns), path)
        socket.scope["user"] = user
        made.append(socket)
        return socket

    yield make
    for socket in made:
        if not socket.future.done():
            await socket.disconnect()
    await sync_to_async(connections.close_all)()  # the sync thread's connection, or it outlives the test database
