"""Celery tasks: thin wrappers that take ids and call the runtime or a service."""

from celery import shared_task
from django.conf import settings

from . import approvals, liveness, runtime
from .workflows import cleanup_workflows


# The hard limit is a backstop: the runtime keeps to the turn's own deadline, which is shorter.
@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True,
             time_limit=settings.TOOLHUB_TURN_TIME_LIMIT + settings.TOOLHUB_TURN_STALL)  # fmt: skip
def run_turn(turn_id: int, takeover: int | None = None) -> None:
    """Idempotent: a finished turn is skipped, and so is one another live worker runs; a turn whose worker died
    is taken over from its last stored step (`takeover`: the attempt the watchdog found stalled)."""
    runtime.run_turn(turn_id, takeover=takeover)


@shared_task(ignore_result=True)
def watch_turns() -> dict:
    """Periodic (CELERY_BEAT_SCHEDULE): fail turns past their deadline, send stalled ones to a worker again."""
    return liveness.watch_turns()


@shared_task
def cleanup_expired_workflows() -> dict:
    """Periodic (CELERY_BEAT_SCHEDULE): delete workflows one TTL past expiry, mark newly expired ones.

    Safe to retry or run twice at once: every batch is one guarded statement. Returns the counts.
    """
    return cleanup_workflows()


@shared_task(ignore_result=True)
def expire_approval(approval_id: int) -> bool:
    """Scheduled at request time for the timeout: no decision by then means denied."""
    return approvals.expire_approval(approval_id)
