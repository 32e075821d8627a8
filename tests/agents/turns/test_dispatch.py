"""Handing turns to the broker: a broker that does not take the task fails the turn visibly within
TOOLHUB_BROKER_WAIT; a turn still queued a lease after its task was sent is sent again (the task was lost)."""

import datetime

import pytest
from django.utils import timezone
from kombu.exceptions import OperationalError

from agents.models import Conversation, Turn, TurnEvent
from agents.openai_api.errors import failure_error
from agents.turns import dispatch, watchdog
from agents.turns.events import FailureReason
from agents.turns.start import create_turn
from tests.support.builders import make_user

pytestmark = pytest.mark.django_db


class Broker:
    """Stands in for Celery's publish: records what was sent, or refuses it as a broker that is down does."""

    def __init__(self, monkeypatch, *, down: bool = False):
        self.down, self.sent, self.policies = down, [], []
        monkeypatch.setattr(dispatch, "is_eager", lambda: False)
        monkeypatch.setattr(watchdog, "is_eager", lambda: False)
        task = dispatch._task(dispatch.RUN_TURN)
        monkeypatch.setattr(task, "apply_async", self.apply_async)

    def apply_async(self, args, *, retry, retry_policy):
        self.policies.append(retry_policy)
        if self.down:
            raise OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
        self.sent.append(args[0])


@pytest.fixture
def turn():
    return create_turn(Conversation.objects.create(owner=make_user()), "hello")


def events(turn) -> list[tuple[str, dict]]:
    return [(e.type, e.payload) for e in TurnEvent.objects.filter(turn=turn).order_by("sequence")]


def test_a_broker_that_is_down_fails_the_turn_with_an_error_and_done_a_stream_can_end_on(turn, monkeypatch, settings):
    settings.TOOLHUB_BROKER_WAIT = 2.0
    broker = Broker(monkeypatch, down=True)
    assert dispatch.publish_turn(turn.id) is False
    turn.refresh_from_db()
    assert turn.status == Turn.Status.FAILED
    (error_type, error), (done_type, done) = events(turn)
    assert (error_type, error["reason"], done_type, done["status"]) == ("error", "broker_unavailable", "done", "failed")
    # Retries spread over the configured wait, the first at once.
    assert broker.policies == [{"max_retries": 4, "interval_start": 0, "interval_step": 0.5, "interval_max": 0.5}]
    api_error = failure_error(error)
    assert (api_error.status, api_error.code, api_error.headers) == (503, "broker_unavailable", {"Retry-After": "5"})


def test_a_published_turn_records_when_and_stays_queued_for_its_worker(
    turn, monkeypatch, django_capture_on_commit_callbacks
):
    broker = Broker(monkeypatch)
    with django_capture_on_commit_callbacks(execute=True):
        dispatch.enqueue_turn(turn.id)
        assert broker.sent == []  # not before its rows are committed
    assert broker.sent == [turn.id]
    turn.refresh_from_db()
    assert turn.status == Turn.Status.QUEUED and turn.published_at is not None
    assert events(turn) == []


def test_the_watchdog_sends_again_a_turn_still_queued_a_lease_after_its_task_was_sent(
    turn, monkeypatch, settings, django_capture_on_commit_callbacks
):
    broker = Broker(monkeypatch)
    dispatch.publish_turn(turn.id)
    assert watchdog.watch_turns() == 0  # within its lease: a worker may still be on its way
    Turn.objects.filter(pk=turn.id).update(
        published_at=timezone.now() - datetime.timedelta(seconds=settings.TOOLHUB_TURN_LEASE + 1)
    )
    with django_capture_on_commit_callbacks(execute=True):
        assert watchdog.watch_turns() == 1
    assert broker.sent == [turn.id, turn.id]
    turn.refresh_from_db()
    assert turn.status == Turn.Status.QUEUED
    assert turn.published_at > timezone.now() - datetime.timedelta(seconds=5)
    assert watchdog.watch_turns() == 0  # sent again once a lease, not at every sweep


def test_with_eager_celery_a_queued_turn_is_never_sent_again(turn, settings):
    Turn.objects.filter(pk=turn.id).update(
        created_at=timezone.now() - datetime.timedelta(seconds=settings.TOOLHUB_TURN_LEASE + 1)
    )
    assert watchdog.watch_turns() == 0


def test_a_queued_turn_past_its_deadline_fails_even_while_the_broker_is_down(turn, monkeypatch, settings):
    Broker(monkeypatch, down=True)
    Turn.objects.filter(pk=turn.id).update(
        created_at=timezone.now() - datetime.timedelta(seconds=settings.TOOLHUB_TURN_TIME_LIMIT + 1)
    )
    watchdog.watch_turns()
    turn.refresh_from_db()
    assert turn.status == Turn.Status.FAILED
    assert [payload.get("reason") for _, payload in events(turn)][0] == FailureReason.TURN_TIMEOUT


@pytest.mark.django_db(transaction=True)
def test_a_turn_started_in_a_thread_keeps_the_requests_context(monkeypatch):
    """The embedded default runs a turn in a thread of the request's process: it carries the request's log context
    (and with it the trace a request span started), as a worker's turn carries it in the task's headers."""
    import threading

    from toolhub.log_context import bound, current

    monkeypatch.setattr(dispatch, "is_eager", lambda: True)
    seen, done = {}, threading.Event()

    def run(turn_id):
        seen.update(current(), turn=turn_id)
        done.set()

    monkeypatch.setattr(dispatch, "_run_in_thread", run)
    turn = create_turn(Conversation.objects.create(owner=make_user()), "hello")
    with bound(request_id="req-1", channel="console"):
        dispatch.start_in_background(turn.pk)  # outside a transaction: started at once

    assert done.wait(10)
    assert seen == {"request_id": "req-1", "channel": "console", "turn": turn.pk}
