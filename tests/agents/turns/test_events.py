"""Storing and broadcasting events: one statement each, never by a run that lost its turn, a number taken first
skipped; broadcast in order, to both groups, and (for a network layer) through one loop per process."""

import asyncio
import threading
import time

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from agents.models import Conversation, Turn, TurnEvent
from agents.turns import events
from agents.turns.events import CONSOLE_GROUP, TurnTakenOver, emit
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


def fields(instance) -> dict:
    return {field.attname: getattr(instance, field.attname) for field in instance._meta.concrete_fields}


@pytest.fixture
def running(db):
    turn = create_turn(Conversation.objects.create(owner=make_user("owner")), "What is 15 + 27?")
    Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.RUNNING, attempt=2)
    return turn


def test_an_event_of_the_run_holding_its_turn_is_one_statement(running):
    with CaptureQueriesContext(connection) as queries:
        event = emit(running.id, "status", phase="analysis", attempt=2, after=0, message="hello")
    assert len(queries) == 1, [query["sql"] for query in queries]  # no savepoint, no read of the hold
    stored = TurnEvent.objects.get()
    assert fields(event) == fields(stored)  # the instance returned is the row stored, every field
    assert (stored.turn_id, stored.sequence, stored.payload) == (running.pk, 1, {"message": "hello"})
    assert not event._state.adding and event._state.db == "default"


def test_a_run_that_no_longer_holds_its_turn_stores_nothing(running):
    with pytest.raises(TurnTakenOver):
        emit(running.id, "status", phase="analysis", attempt=1, after=0, message="from the old run")
    Turn.objects.filter(pk=running.pk).update(status=Turn.Status.FAILED)
    with pytest.raises(TurnTakenOver):
        emit(running.id, "status", phase="analysis", attempt=2, after=0, message="after the turn failed")
    assert not TurnEvent.objects.exists()


def test_a_number_taken_first_is_skipped_inside_the_callers_transaction(running):
    emit(running.id, "status", phase="analysis", message="another emitter")
    with transaction.atomic():
        event = emit(running.id, "status", phase="analysis", attempt=2, after=0, message="stale number")
        assert Turn.objects.filter(pk=running.pk).exists()  # the transaction is still usable
    assert event.sequence == 2
    assert list(TurnEvent.objects.order_by("sequence").values_list("sequence", "payload__message")) == [
        (1, "another emitter"), (2, "stale number")
    ]  # fmt: skip


# Sessions of the test database waiting for a lock another holds.
LOCK_WAITERS = """SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
AND wait_event_type = 'Lock'"""


@pytest.mark.postgres  # the hold is the turn's row locked: an event waits for a takeover in flight, then sees it
@pytest.mark.django_db(transaction=True)
def test_an_event_of_the_old_run_waits_for_the_watchdogs_takeover_and_then_stores_nothing(running):
    taking_over, waited = threading.Event(), []

    def watchdog():  # takes the turn over in a transaction it commits once the old run's event waits for it
        with transaction.atomic():
            Turn.objects.filter(pk=running.pk).update(attempt=3)
            taking_over.set()
            with connection.cursor() as cursor:
                for _ in range(200):
                    cursor.execute(LOCK_WAITERS)
                    if cursor.fetchone()[0]:
                        waited.append(True)
                        break
                    time.sleep(0.05)
        connection.close()

    thread = threading.Thread(target=watchdog)
    thread.start()
    try:
        assert taking_over.wait(timeout=10)
        with pytest.raises(TurnTakenOver):  # without the lock it would read the old row and store the event
            emit(running.id, "status", phase="analysis", attempt=2, after=0, message="from the old run")
    finally:
        thread.join(timeout=30)
    assert waited == [True] and not TurnEvent.objects.exists()
