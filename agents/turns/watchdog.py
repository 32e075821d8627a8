"""Turns whose worker died, or that outlive their deadline: found, then restarted or failed visibly, once.

A running turn holds a lease: the run that claimed it (`Turn.attempt`) beats
`Turn.heartbeat_at` every TOOLHUB_TURN_LEASE / 6 seconds (`lease_held`). A turn
is stalled when it runs with no beat for TOOLHUB_TURN_LEASE seconds (its
worker was killed, or lost its database), and overdue once past
`Turn.deadline_at` (TOOLHUB_TURN_TIME_LIMIT after it started; a queued turn
TOOLHUB_TURN_TIME_LIMIT after it was created). Under the turn's row lock:

- overdue: failed (turn_timeout);
- stalled, and the dead run showed nothing a client could act on (no content,
  no tool call): queued again; the next run restarts it and does not store
  again the events the dead run stored (agents.turns.runtime);
- stalled otherwise: failed (worker_lost). Content a client already read is
  never sent twice, and a tool with side effects is never called twice;
- queued a lease after its task was handed to the broker (`Turn.published_at`)
  with no worker having claimed it: the task was lost (a broker restarted
  without persistence), so it is handed over again. A copy that was only slow
  to arrive is harmless: a run claims a turn once (agents.turns.runtime.claim).

The periodic task (beat), a worker as it starts and every stream waiting on a
quiet turn call `take_over`; a redelivered task's claim uses `take_over_locked`.
Never runs a turn itself, never fails a turn whose lease is held.
"""

import datetime
import logging

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from agents.models import Turn, TurnEvent

from .dispatch import enqueue_turn, is_eager
from .events import FailureReason
from .lifecycle import deadline_from, fail_turn, lease

log = logging.getLogger(__name__)
EventType = TurnEvent.Type
# What a client may have read or acted on: a run that stored one of these is never restarted.
SHOWN_FOR_GOOD = (EventType.DELTA, EventType.TOOL_CALL, EventType.TOOL_RESULT, EventType.APPROVAL_REQUIRED)
FAILURES = {
    FailureReason.TURN_TIMEOUT: "The turn did not finish within its deadline.",
    FailureReason.WORKER_LOST: "The worker running this turn stopped after the answer had begun; send the request "
    "again.",
}


def is_stalled(turn: Turn, now: datetime.datetime) -> bool:
    beat = turn.heartbeat_at or turn.started_at
    return turn.status == Turn.Status.RUNNING and (beat is None or beat < now - lease())


def is_overdue(turn: Turn, now: datetime.datetime) -> bool:
    if turn.status == Turn.Status.QUEUED:
        return deadline_from(turn.created_at) < now
    return turn.status == Turn.Status.RUNNING and turn.deadline_at is not None and turn.deadline_at < now


def is_lost_in_queue(turn: Turn, now: datetime.datetime) -> bool:
    """Queued a lease after it was handed to the broker (never with eager Celery: no broker, nothing to lose)."""
    handed = turn.published_at or turn.created_at
    return turn.status == Turn.Status.QUEUED and not is_eager() and handed is not None and handed < now - lease()


def needs_taking_over(turn: Turn, now: datetime.datetime) -> bool:
    return is_overdue(turn, now) or is_stalled(turn, now) or is_lost_in_queue(turn, now)


def take_over_locked(turn: Turn) -> bool:
    """Decide for a turn whose row the caller holds locked: True when it is queued to run again."""
    now = timezone.now()
    if is_overdue(turn, now):
        log.warning("turn %s is past its deadline: failed", turn.pk)
        fail_turn(turn.pk, FailureReason.TURN_TIMEOUT, FAILURES[FailureReason.TURN_TIMEOUT])
        return False
    if is_lost_in_queue(turn, now):
        log.warning("turn %s is still queued a lease after its task was sent: sent again", turn.pk)
        return True
    if not is_stalled(turn, now):
        return False
    if TurnEvent.objects.filter(turn=turn, type__in=SHOWN_FOR_GOOD).exists():
        log.warning("turn %s lost its worker after it showed content or called a tool: failed", turn.pk)
        fail_turn(turn.pk, FailureReason.WORKER_LOST, FAILURES[FailureReason.WORKER_LOST])
        return False
    log.warning("turn %s lost its worker before it showed anything: queued again", turn.pk)
    Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.QUEUED, heartbeat_at=None)
    turn.status, turn.heartbeat_at = Turn.Status.QUEUED, None
    return True


def take_over(turn_id: int) -> None:
    """Restart or fail the turn if it is stalled or overdue; nothing (one read) otherwise."""
    turn = Turn.objects.filter(pk=turn_id).first()
    if turn is None or not needs_taking_over(turn, timezone.now()):
        return
    with transaction.atomic():
        turn = Turn.objects.select_for_update(skip_locked=True).filter(pk=turn_id).first()
        requeue = turn is not None and take_over_locked(turn)
    if requeue:
        enqueue_turn(turn_id)


def stalled_or_overdue_turns() -> list[int]:
    now = timezone.now()
    stalled = Q(status=Turn.Status.RUNNING) & (
        Q(heartbeat_at__lt=now - lease()) | Q(heartbeat_at__isnull=True, started_at__lt=now - lease())
    )
    overdue = Q(status=Turn.Status.RUNNING, deadline_at__lt=now) | Q(
        status=Turn.Status.QUEUED, created_at__lt=now - datetime.timedelta(seconds=settings.TOOLHUB_TURN_TIME_LIMIT)
    )
    found = stalled | overdue
    if not is_eager():
        found |= Q(status=Turn.Status.QUEUED) & (
            Q(published_at__lt=now - lease()) | Q(published_at__isnull=True, created_at__lt=now - lease())
        )
    return list(Turn.objects.filter(found).values_list("pk", flat=True)[:1000])


def watch_turns() -> int:
    """One sweep: take over every stalled or overdue turn. Returns how many were looked at."""
    found = stalled_or_overdue_turns()
    for turn_id in found:
        take_over(turn_id)
    return len(found)
