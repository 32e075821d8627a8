"""Console fan-out across processes: two Daphnes on one Redis, each in the console group once for all its sockets."""

import asyncio
import time

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db import connections
from django.test import Client

from agents.models import Conversation, TurnEvent
from agents.turns.events import CONSOLE_GROUP, emit
from agents.turns.start import create_turn
from tests.support.builders import make_user
from tests.support.console_socket import open_socket
from tests.support.servers import daphne, database_env

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
SOCKETS_PER_PROCESS = 3


def drawn(socket, turn) -> list[int]:
    """The event sequences the socket's live frames draw, after its history snapshot (a frame may carry several)."""
    return [sequence for _, sequence in socket.events(turn.id)]


async def until(condition, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)


async def console_group_size() -> int:
    layer = get_channel_layer()
    return await layer.connection(layer.consistent_hash(CONSOLE_GROUP)).zcard(layer._group_key(CONSOLE_GROUP))


async def follow_a_turn_on(bases: list[str], session: str, turn) -> tuple[list, object, int]:
    path = f"/ws/console/{turn.conversation_id}/"
    before = await console_group_size()  # a killed server's channel stays a member until the group expires
    sockets = [await open_socket(base, path, session) for base in bases for _ in range(SOCKETS_PER_PROCESS)]
    await until(lambda: all(socket.messages for socket in sockets))  # every history snapshot is in
    members = await console_group_size() - before
    for number in range(1, 4):
        await sync_to_async(emit)(turn.id, TurnEvent.Type.STATUS, phase="analysis", message=f"step {number}")
    leaving = sockets[0]
    await leaving.close()  # mid-turn: its process may be handing it events 1-3 right now
    for number in range(4, 7):
        await sync_to_async(emit)(turn.id, TurnEvent.Type.STATUS, phase="analysis", message=f"step {number}")
    staying = sockets[1:]
    await until(lambda: all(len(drawn(socket, turn)) >= 6 for socket in staying))
    await asyncio.sleep(0.5)  # a duplicate would arrive now
    for socket in staying:
        await socket.close()
    await sync_to_async(connections.close_all)()  # emit's thread's connection, or it outlives the test database
    return staying, leaving, members


def test_sockets_on_two_daphnes_each_draw_every_event_once_in_order_and_one_leaving_mid_turn_disturbs_none():
    viewer = make_user("viewer", role="viewer")
    client = Client()
    client.force_login(viewer)
    turn = create_turn(Conversation.objects.create(owner=viewer, title="fan-out"), "What is 15 + 27?")
    env = database_env(TOOLHUB_WARM_START="0")  # the console never searches
    with daphne(env) as first, daphne(env) as second:
        staying, leaving, members = asyncio.run(follow_a_turn_on([first, second], client.cookies["sessionid"].value,
                                                                 turn))  # fmt: skip
    assert members == 2  # six sockets, one channel per process
    for socket in staying:
        assert drawn(socket, turn) == [1, 2, 3, 4, 5, 6], socket.ended
    assert drawn(leaving, turn) == list(range(1, len(drawn(leaving, turn)) + 1))  # what it got, in order
