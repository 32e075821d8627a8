"""Celery tasks: thin wrappers that take ids and call the runtime or a service."""

from celery import shared_task
from django.conf import settings
from oauth2_provider.models import clear_expired

from .turns import approvals, retention, runtime, watchdog
from .turns.workflows import cleanup_workflows


@shared_task(acks_late=True, time_limit=settings.TOOLHUB_TURN_TIME_LIMIT, ignore_result=True)
def run_turn(turn_id: int) -> None:
    """Idempotent: a finished turn is skipped, a redelivered running one restarts cleanly."""
    runtime.run_turn(turn_id)


@shared_task(ignore_result=True)
def watch_turns() -> int:
    """Periodic (CELERY_BEAT_SCHEDULE), and once as a worker starts: restart or fail the turns whose worker died
    or whose deadline passed (agents/turns/watchdog.py). Safe to run anywhere, twice at once."""
    return watchdog.watch_turns()


@shared_task
def cleanup_expired_workflows() -> dict:
    """Periodic (CELERY_BEAT_SCHEDULE): delete workflows one TTL past expiry, mark newly expired ones.

    Safe to retry or run twice at once: every batch is one guarded statement. Returns the counts.
    """
    return cleanup_workflows()


@shared_task(ignore_result=True)
def clear_expired_oauth_tokens() -> None:
    """Periodic (CELERY_BEAT_SCHEDULE): delete the OAuth tokens and codes that can no longer be used, in batches
    (django-oauth-toolkit's clear_expired: access tokens past expiry with no refresh token, refresh tokens
    TOOLHUB_OAUTH_REFRESH_TOKEN_SECONDS after their access token expired, revoked ones once they would have
    expired, kept until then so a reused one is still detected, and expired authorization codes). Safe to run twice."""
    clear_expired()


@shared_task(ignore_result=True)
def expire_approval(approval_id: int) -> bool:
    """Scheduled at request time for the timeout: no decision by then means denied."""
    return approvals.expire_approval(approval_id)


@shared_task
def apply_retention() -> dict:
    """Periodic (CELERY_BEAT_SCHEDULE): summarise and delete the finished turns older than TOOLHUB_RETENTION_DAYS
    with their rows (agents/turns/retention.py). Safe to retry or run twice at once: each batch is one transaction over
    rows it has locked. Returns what it removed."""
    return retention.apply_retention().as_dict()
