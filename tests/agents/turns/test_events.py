"""Broadcasting stored events: in order, both groups, and (for a network layer) through one loop per process."""

import asyncio
import threading

import pytest

from agents.models import Conversation
from agents.turns import events
from agents.turns.events import CONSOLE_GROUP, emit
from agents.turns.start import create_turn
from tests.support.builders import make_user


class RecordingLayer:
    """A network layer double: records (group, sequence, the running loop) of each group_send."""

    def __init__(self):
        self.sent = []

    async def group_send(self, group, message):
        self.sent.append((group, message["event"]["sequence"], asyncio.get_running_loop()))


@pytest.mark.django_db(transaction=True)
def test_a_network_layer_gets_every_event_in_order_through_one_long_lived_loop(monkeypatch):
    layer = RecordingLayer()
    monkeypatch.setattr(events, "get_channel_layer", lambda: layer)
    turn = create_turn(Conversation.objects.create(owner=make_user("owner")), "What is 15 + 27?")

    def emit_three():  # a thread without an event loop, as a Celery worker's
        for number in range(3):
            emit(turn.id, "status", phase="analysis", message=f"step {number}")

    worker = threading.Thread(target=emit_three)
    worker.start()
    worker.join(timeout=30)
    emit(turn.id, "status", phase="analysis", message="from the main thread")
    assert [(group, sequence) for group, sequence, _ in layer.sent] == [
        (group, sequence) for sequence in (1, 2, 3, 4) for group in (f"turn.{turn.id}", CONSOLE_GROUP)
    ]
    loops = {loop for _, _, loop in layer.sent}
    assert len(loops) == 1 and loops.pop().is_running()  # not a new loop (and Redis connection) per call
