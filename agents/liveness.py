"""Whether a turn is still alive: its deadline, its worker's heartbeat, the watchdog, failing it visibly.

Every unfinished turn ends within its deadline (TOOLHUB_TURN_TIME_LIMIT after
it was queued or resumed, plus TOOLHUB_TURN_GRACE): answered by a worker, or
failed here with an error event and `done` (status failed) that its streams
show. A running turn whose worker stopped beating is taken over by another
worker (agents.runtime.claim decides). Every state change is one conditional
UPDATE, so of two deciders exactly one wins. Never runs a turn itself.
"""

import logging
import threading
from datetime import datetime, timedelta

from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone

from .events import emit
from .models import Turn, TurnEvent

log = logging.getLogger(__name__)

UNFINISHED = (Turn.Status.QUEUED, Turn.Status.RUNNING, Turn.Status.WAITING)
OVERDUE_MESSAGE = "The turn did not finish in time: it was stopped after {seconds:g} s."
# The `code` of a failed turn's error event (the API's error code): the deadline passed, the model failed, other.
TIMEOUT_CODE = "turn_timeout"
MODEL_CODE = "model_unavailable"
FAILED_CODE = "turn_failed"
WATCHDOG_BATCH = 200


def turn_deadline(*, extra_seconds: float = 0) -> datetime:
    return timezone.now() + timedelta(seconds=settings.TOOLHUB_TURN_TIME_LIMIT + extra_seconds)


def grace() -> timedelta:
    return timedelta(seconds=settings.TOOLHUB_TURN_GRACE)


def stall() -> timedelta:
    return timedelta(seconds=settings.TOOLHUB_TURN_STALL)


def fail_turn(
    turn_id: int, message: str, *, code: str = FAILED_CODE, attempt: int | None = None, overdue: bool = False
) -> bool:
    """Fail an unfinished turn, once: only the caller whose UPDATE matched emits the error and `done`.

    `attempt`: only while that run owns the turn. `overdue`: only when its deadline plus the grace has passed.
    """
    turns = Turn.objects.filter(pk=turn_id, status__in=UNFINISHED)
    if attempt is not None:
        turns = turns.filter(attempt=attempt)
    if overdue:
        turns = turns.filter(deadline_at__lte=timezone.now() - grace())
    if not turns.update(status=Turn.Status.FAILED, error=message[:2000], finished_at=timezone.now()):
        return False
    emit(turn_id, TurnEvent.Type.ERROR, phase="error", message=message, code=code)
    emit(turn_id, TurnEvent.Type.DONE, phase="done", status=Turn.Status.FAILED)
    return True


def fail_if_overdue(turn_id: int) -> bool:
    return fail_turn(turn_id, overdue_message(), code=TIMEOUT_CODE, overdue=True)


def overdue_message() -> str:
    return OVERDUE_MESSAGE.format(seconds=settings.TOOLHUB_TURN_TIME_LIMIT)


def stream_deadline(turn_id: int) -> tuple[str, datetime | None]:
    """The turn's status and when a stream following it should stop waiting (its deadline plus the grace)."""
    status, deadline = Turn.objects.values_list("status", "deadline_at").get(pk=turn_id)
    return status, (deadline + grace()) if deadline else None


def watch_turns() -> dict:
    """The watchdog (agents.tasks.watch_turns, on the beat schedule): fail overdue turns, take over stalled ones.

    A running turn whose heartbeat is older than TOOLHUB_TURN_STALL, and a queued one that waited that long (its
    message may have been lost with a Redis restart), is sent to a worker again; the heartbeat is moved on so the
    next watch does not send it twice. Returns the counts.
    """
    from .tasks import run_turn  # tasks import the runtime, which imports this module

    now = timezone.now()
    overdue = list(
        Turn.objects.filter(status__in=UNFINISHED, deadline_at__lte=now - grace()).values_list("pk", flat=True)[
            :WATCHDOG_BATCH
        ]
    )
    failed = sum(fail_if_overdue(pk) for pk in overdue)
    cutoff = now - stall()
    stalled = Turn.objects.filter(status__in=(Turn.Status.RUNNING, Turn.Status.QUEUED), deadline_at__gt=now).filter(
        heartbeat_at__lt=cutoff
    ) | Turn.objects.filter(status=Turn.Status.QUEUED, deadline_at__gt=now, heartbeat_at=None, created_at__lt=cutoff)
    taken = 0
    for pk, attempt, heartbeat in stalled.values_list("pk", "attempt", "heartbeat_at")[:WATCHDOG_BATCH]:
        if Turn.objects.filter(pk=pk, attempt=attempt, heartbeat_at=heartbeat).update(heartbeat_at=now):
            run_turn.apply_async(args=[pk], kwargs={"takeover": attempt})
            taken += 1
    if failed or taken:
        log.warning("turn watchdog: %s overdue turn(s) failed, %s stalled turn(s) sent again", failed, taken)
    return {"failed": failed, "taken_over": taken}


class Heartbeat:
    """While a worker runs a turn, a daemon thread marks it alive; `lost` is set once this run no longer owns it.

    Each beat is one UPDATE on its own connection, given back at once (the pool stays small).
    """

    def __init__(self, turn_id: int, attempt: int):
        self.turn_id, self.attempt = turn_id, attempt
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"turn-{turn_id}-heartbeat", daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=10)

    def _beat(self) -> None:
        while not self._stop.wait(settings.TOOLHUB_TURN_HEARTBEAT):
            try:
                owned = Turn.objects.filter(pk=self.turn_id, attempt=self.attempt, status=Turn.Status.RUNNING).update(
                    heartbeat_at=timezone.now()
                )
            except Exception as exc:  # the database is away for a moment: try again at the next beat
                log.warning("heartbeat of turn %s failed: %r", self.turn_id, exc)
                close_old_connections()
                continue
            finally:
                connection.close()
            if not owned:
                self.lost.set()
                return
