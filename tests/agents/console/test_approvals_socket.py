"""/ws/approvals/: an open inbox hears "changed" when a call starts waiting (at once) and when turns move (once per
burst, trailing); refused without login or permission like every console socket."""

import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser

from agents.console import approvals_socket
from agents.console.consumers import FORBIDDEN
from agents.models import Conversation, TurnEvent
from agents.turns.events import emit
from agents.turns.start import create_turn
from tests.agents.console.conftest import ARRIVAL
from tests.support.builders import make_user

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]
TRAILING = 0.2
APPROVALS = "/ws/approvals/"


@pytest.fixture(autouse=True)
def _short_trailing(monkeypatch):
    monkeypatch.setattr(approvals_socket, "TRAILING_SECONDS", TRAILING)


@sync_to_async
def a_turn(owner):
    return create_turn(Conversation.objects.create(owner=owner, title="t"), "docker restart web")


@sync_to_async
def store(turn, kind, **payload):
    return emit(turn.id, kind, phase=payload.pop("phase", ""), **payload)


async def test_anonymous_and_roleless_users_are_refused(communicator):
    nobody = await sync_to_async(get_user_model().objects.create_user)("nobody", password="a-long-test-password")
    for user in (AnonymousUser(), nobody):
        connected, code = await communicator(APPROVALS, user).connect(ARRIVAL)
        assert not connected and code == FORBIDDEN


async def test_a_waiting_call_is_said_at_once_and_a_burst_of_moves_once(communicator):
    viewer = await sync_to_async(make_user)("watcher", role="viewer")
    socket = communicator(APPROVALS, viewer)
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
