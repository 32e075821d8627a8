"""/ws/approvals/: an open inbox hears "changed" when a call starts waiting (at once) and when turns move (once per
burst, trailing); refused without login or permission like every console socket."""

import asyncio

import pytest
import pytest_asyncio
from asgiref.sync import sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.db import connections

from agents.console import approvals_socket
from agents.console.consumers import FORBIDDEN
from agents.console.websocket_urls import websocket_urlpatterns
from agents.models import Conversation, TurnEvent
from agents.turns.events import emit
from agents.turns.start import create_turn
from tests.support.builders import make_user

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]
ARRIVAL = 10  # seconds to wait for what must arrive (a loaded host); what must not arrive is awaited briefly
TRAILING = 0.2


@pytest.fixture(autouse=True)
def _short_trailing(monkeypatch):
    monkeypatch.setattr(approvals_socket, "TRAILING_SECONDS", TRAILING)


@pytest_asyncio.fixture
async def socket_for():
    made = []

    def make(user) -> WebsocketCommunicator:
        socket = WebsocketCommunicator(URLRouter(websocket_urlpatterns), "/ws/approvals/")
        socket.scope["user"] = user
        made.append(socket)
        return socket

    yield make
    for socket in made:
        if not socket.future.done():
            await socket.disconnect()
    await sync_to_async(connections.close_all)()


@sync_to_async
def a_turn(owner):
    return create_turn(Conversation.objects.create(owner=owner, title="t"), "docker restart web")


@sync_to_async
def store(turn, kind, **payload):
    return emit(turn.id, kind, phase=payload.pop("phase", ""), **payload)


async def test_anonymous_and_roleless_users_are_refused(socket_for):
    nobody = await sync_to_async(get_user_model().objects.create_user)("nobody", password="a-long-test-password")
    for user in (AnonymousUser(), nobody):
        connected, code = await socket_for(user).connect(ARRIVAL)
        assert not connected and code == FORBIDDEN


async def test_a_waiting_call_is_said_at_once_and_a_burst_of_moves_once(socket_for):
    viewer = await sync_to_async(make_user)("watcher", role="viewer")
    socket = socket_for(viewer)
    connected, _ = await socket.connect(ARRIVAL)
    assert connected
    assert await socket.receive_from(ARRIVAL) == "changed"  # whatever came before the socket: read the inbox now
    turn = await a_turn(viewer)
    await store(turn, TurnEvent.Type.DELTA, content="thinking")
    assert await socket.receive_nothing(TRAILING * 2)  # the answer's pieces change no approval
    await store(turn, TurnEvent.Type.APPROVAL_REQUIRED, phase="approval_required", tool_name="restart")
    assert await socket.receive_from(ARRIVAL) == "changed"
    for status in ("approved", "running", "done"):
        await store(turn, TurnEvent.Type.STATUS, phase=status)
    assert await socket.receive_from(ARRIVAL) == "changed"
    assert await socket.receive_nothing(TRAILING * 3)  # one word for the three
    await asyncio.sleep(0)
