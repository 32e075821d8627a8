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
  again the events the dead run stored (agents.runtime);
- stalled otherwise: failed (worker_lost). Content a client already read is
  never sent twice, and a tool with side effects is never called twice.

The periodic task (beat), a worker as it starts and every stream waiting on a
quiet turn call `take_over`; a redelivered task's claim uses `take_over_locked`.
Never runs a turn itself, never fails a turn whose lease is held.
"""

import datetime
import logging
import threading
from contextlib import contextmanager

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from .events import FailureReason, emit
from .memory import message_tokens
from .models import Message, ToolApproval, Turn, TurnEvent

log = logging.getLogger(__name__)
EventType = TurnEvent.Type
# What a client may have read or acted on: a run that stored one of these is never restarted.
SHOWN_FOR_GOOD = (EventType.DELTA, EventType.TOOL_CALL, EventType.TOOL_RESULT, EventType.APPROVAL_REQUIRED)
FAILURES = {
    FailureReason.TURN_TIMEOUT: "The turn did not finish within its deadline.",
    FailureReason.WORKER_LOST: "The worker running this turn stopped after the answer had begun; send the request "
    "again.",
}


def lease() -> datetime.timedelta:
    return datetime.timedelta(seconds=settings.TOOLHUB_TURN_LEASE)


def deadline_from(start: datetime.datetime) -> datetime.datetime:
    return start + datetime.timedelta(seconds=settings.TOOLHUB_TURN_TIME_LIMIT)


def is_stalled(turn: Turn, now: datetime.datetime) -> bool:
    beat = turn.heartbeat_at or turn.started_at
    return turn.status == Turn.Status.RUNNING and (beat is None or beat < now - lease())


def is_overdue(turn: Turn, now: datetime.datetime) -> bool:
    if turn.status == Turn.Status.QUEUED:
        return deadline_from(turn.created_at) < now
    return turn.status == Turn.Status.RUNNING and turn.deadline_at is not None and turn.deadline_at < now


def needs_taking_over(turn: Turn, now: datetime.datetime) -> bool:
    return is_overdue(turn, now) or is_stalled(turn, now)


@contextmanager
def lease_held(turn_id: int, attempt: int):
    """Beat the turn's heartbeat from a thread while the block runs (the run itself may wait on a model)."""
    stop = threading.Event()

    def beat():
        try:
            while not stop.wait(settings.TOOLHUB_TURN_LEASE / 6):
                Turn.objects.filter(pk=turn_id, attempt=attempt, status=Turn.Status.RUNNING).update(
                    heartbeat_at=timezone.now()
                )
                connection.close()  # back to the pool between beats
        except Exception:  # a missed beat only makes the turn look stalled sooner; never kill the run
            log.warning("heartbeat of turn %s stopped", turn_id, exc_info=True)
        finally:
            connection.close()

    thread = threading.Thread(target=beat, name=f"turn-{turn_id}-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()


def fail_turn(turn_id: int, reason: str, message: str, *, detail: str = "", attempt: int | None = None) -> bool:
    """Mark the unfinished turn failed (end_turn); False when it had already ended (or, with `attempt`, when
    another run holds it)."""
    return end_turn(turn_id, Turn.Status.FAILED, reason, message, detail=detail, attempt=attempt)


def end_turn(turn_id: int, status: str, reason: str, message: str, *, detail: str = "", phase: str = "error",
             attempt: int | None = None) -> bool:  # fmt: skip
    """End the unfinished turn early (failed, or cancelled by an operator), in one transaction: its status and
    error, its pending approvals closed (nothing will resume it), its open tool calls answered, its error and
    done events. False when it had already ended (or, with `attempt`, when another run holds it)."""
    unfinished = ~Q(status__in=Turn.ENDED)
    owned = Q(attempt=attempt) if attempt is not None else Q()
    now = timezone.now()
    with transaction.atomic():
        updated = Turn.objects.filter(unfinished & owned, pk=turn_id).update(
            status=status, error=detail or message, finished_at=now
        )
        if not updated:
            return False
        ToolApproval.objects.filter(turn_id=turn_id, status=ToolApproval.Status.PENDING).update(
            status=ToolApproval.Status.EXPIRED, decided_at=now
        )
        answer_open_tool_calls(turn_id, message)
        emit(turn_id, EventType.ERROR, phase=phase, message=message, reason=reason, detail=detail or message)
        emit(turn_id, EventType.DONE, phase="done", status=status)
    return True


def answer_open_tool_calls(turn_id: int, message: str) -> None:
    """The ended turn's tool calls that have no result get one saying so (a failed or cancelled turn): the
    conversation's next turn sends a valid transcript (every call answered, agents.memory), and its model knows
    what ran and that an unanswered call may have run."""
    messages = list(Message.objects.filter(turn_id=turn_id).order_by("id"))
    answered = {m.tool_call_id for m in messages if m.role == Message.Role.TOOL}
    for assistant in (m for m in messages if m.role == Message.Role.ASSISTANT and m.tool_calls):
        for call in assistant.tool_calls:
            if call.get("id") and call["id"] not in answered:
                name = (call.get("function") or {}).get("name", "the tool")
                content = (f"No result: the turn ended while {name} ran ({message}). The call may or may not have "
                           "taken effect; check before doing it again.")  # fmt: skip
                tool = {"role": Message.Role.TOOL, "tool_call_id": call["id"], "content": content}
                Message.objects.create(conversation_id=assistant.conversation_id, turn_id=turn_id,
                                       tokens=message_tokens(tool), **tool)  # fmt: skip


def take_over_locked(turn: Turn) -> bool:
    """Decide for a turn whose row the caller holds locked: True when it is queued to run again."""
    now = timezone.now()
    if is_overdue(turn, now):
        log.warning("turn %s is past its deadline: failed", turn.pk)
        fail_turn(turn.pk, FailureReason.TURN_TIMEOUT, FAILURES[FailureReason.TURN_TIMEOUT])
        return False
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
        from .turns import enqueue_turn  # turns -> tasks -> runtime -> watchdog

        enqueue_turn(turn_id)


def stalled_or_overdue_turns() -> list[int]:
    now = timezone.now()
    stalled = Q(status=Turn.Status.RUNNING) & (
        Q(heartbeat_at__lt=now - lease()) | Q(heartbeat_at__isnull=True, started_at__lt=now - lease())
    )
    overdue = Q(status=Turn.Status.RUNNING, deadline_at__lt=now) | Q(
        status=Turn.Status.QUEUED, created_at__lt=now - datetime.timedelta(seconds=settings.TOOLHUB_TURN_TIME_LIMIT)
    )
    return list(Turn.objects.filter(stalled | overdue).values_list("pk", flat=True)[:1000])


def watch_turns() -> int:
    """One sweep: take over every stalled or overdue turn. Returns how many were looked at."""
    found = stalled_or_overdue_turns()
    for turn_id in found:
        take_over(turn_id)
    return len(found)
