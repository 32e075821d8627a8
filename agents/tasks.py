"""Celery tasks: thin wrappers that take ids and call the runtime or a service."""

import contextlib
from typing import Any

from celery import shared_task
from django.conf import settings
from django.utils import timezone
from oauth2_provider.models import clear_expired
from opentelemetry.trace import StatusCode
from opentelemetry.util.types import AttributeValue

from toolhub.log_context import bound
from toolhub.tracing import tracer

from .console import closed_hours
from .models import ToolApproval, Turn
from .turns import approvals, retention, runtime, watchdog
from .turns.workflows import cleanup_workflows


@shared_task(acks_late=True, time_limit=settings.TOOLHUB_TURN_TIME_LIMIT, ignore_result=True)
def run_turn(turn_id: int) -> None:
    """Idempotent: a finished turn is skipped, a redelivered running one restarts cleanly. Whatever it logs carries
    the turn and its conversation (toolhub.log_context); with traces on it is an `invoke_agent` span, a child of
    the request that started or resumed the turn (the task carries its context). The turn reads the clock in the
    server's zone (TOOLHUB_TIME_ZONE) wherever it runs, never in the viewer's zone of a request it runs inside (eager
    Celery, the embedded default: agents/account/middleware.py)."""
    conversation_id = Turn.objects.filter(pk=turn_id).values_list("conversation_id", flat=True).first()
    with (
        timezone.override(None),
        bound(turn_id=turn_id, conversation_id=conversation_id),
        turn_span(turn_id, conversation_id),
    ):
        runtime.run_turn(turn_id)


@contextlib.contextmanager
def turn_span(turn_id: int, conversation_id: int | None):
    """The turn's span (GenAI `invoke_agent`): how the run ended, and the approval waits it ends or starts (a
    resumed run shows each wait it ends as a span from the request to the decision; a run that pauses, an
    `approval_wait` event per pending call)."""
    with tracer().start_as_current_span("invoke_agent toolhub") as span:
        if not span.is_recording():
            yield
            return
        span.set_attributes({
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "toolhub",
            "gen_ai.conversation.id": str(conversation_id or ""),
            "toolhub.turn.id": turn_id,
        })  # fmt: skip
        turn = Turn.objects.filter(pk=turn_id)
        before: dict[str, Any] = dict(turn.values("status", "heartbeat_at").first() or {})
        yield
        after: dict[str, Any] = dict(turn.values("status", "attempt", "model").first() or {})
        span.set_attributes({f"toolhub.turn.{name}": value for name, value in after.items()})
        if after.get("status") == Turn.Status.FAILED:
            span.set_status(StatusCode.ERROR, "the turn failed")
        approvals = ToolApproval.objects.filter(turn_id=turn_id)
        if before.get("status") == Turn.Status.WAITING and before.get("heartbeat_at"):
            for approval in approvals.filter(decided_at__gte=before["heartbeat_at"]):
                attributes: dict[str, AttributeValue] = {
                    "gen_ai.tool.name": approval.tool_name,
                    "toolhub.approval.id": approval.pk,
                    "toolhub.approval.status": approval.status,
                }
                start = _ns(approval.requested_at)
                tracer().start_span(f"approval_wait {approval.tool_name}", start_time=start,
                                    attributes=attributes).end(end_time=_ns(approval.decided_at))  # fmt: skip
        if after.get("status") == Turn.Status.WAITING:
            for approval in approvals.filter(status=ToolApproval.Status.PENDING):
                span.add_event("approval_wait", {"gen_ai.tool.name": approval.tool_name,
                                                 "toolhub.approval.id": approval.pk})  # fmt: skip


def _ns(moment) -> int:
    return int(moment.timestamp() * 1_000_000_000)


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


@shared_task(ignore_result=True)
def close_overview_hours() -> int:
    """Periodic (CELERY_BEAT_SCHEDULE): sum the last week's closed hours for the overview's breakdown
    (agents/console/closed_hours.py), so a page view sums at most the hours that closed since. Safe to run twice at
    once. Returns how many of the week's hours are summed."""
    now = timezone.now()
    return len(closed_hours.split(now - closed_hours.WEEK, now, now=now).closed)
