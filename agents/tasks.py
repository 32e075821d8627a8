"""Celery tasks: thin wrappers that take ids and call the runtime or a service."""

from celery import shared_task
from django.conf import settings

from . import runtime
from .workflows import expire_workflows


@shared_task(acks_late=True, time_limit=settings.TOOLHUB_TURN_TIME_LIMIT, ignore_result=True)
def run_turn(turn_id: int) -> None:
    """Idempotent: a finished turn is skipped, a redelivered running one restarts cleanly."""
    runtime.run_turn(turn_id)


@shared_task(ignore_result=True)
def cleanup_expired_workflows() -> int:
    """Periodic (CELERY_BEAT_SCHEDULE): expire workflows past their TTL, in batches."""
    return expire_workflows()
