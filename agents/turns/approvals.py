"""Approval of risky tool calls: request, decide, expire. The turn waits without holding a worker.

A call whose policy requires confirmation becomes a pending ToolApproval and
the turn pauses (status waiting). A decision (an operator with the
decide_toolapproval permission, or the conversation's owner through the API)
or the timeout resumes the turn from a new task. No decision in time means
denied. A decision is taken once: the UPDATE only matches a pending row.
"""

import datetime

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from agents.models import ToolApproval, TurnEvent

from .dispatch import enqueue_turn, schedule_approval_timeout
from .events import emit

PERMISSION = "agents.decide_toolapproval"


class ApprovalClosed(Exception):
    """The approval was already decided or has expired."""


def request_approval(*, turn_id: int, tool_call_id: str, tool_name: str, arguments: dict, risk: str) -> ToolApproval:
    approval, created = ToolApproval.objects.get_or_create(
        turn_id=turn_id,
        tool_call_id=tool_call_id,
        defaults={
            "tool_name": tool_name,
            "arguments": arguments,
            "risk": risk,
            "expires_at": timezone.now() + datetime.timedelta(seconds=settings.TOOLHUB_APPROVAL_TIMEOUT),
        },
    )
    if created:
        emit(turn_id, TurnEvent.Type.APPROVAL_REQUIRED, phase="approval_required", approval_id=approval.pk,
             tool_name=tool_name, arguments=arguments, risk=risk, expires_at=approval.expires_at.isoformat(),
             approvers="operators with the approve permission, or the conversation's owner")  # fmt: skip
        transaction.on_commit(lambda: schedule_timeout(approval.pk))
    return approval


def may_decide(user, approval: ToolApproval) -> bool:
    return user.has_perm(PERMISSION) or approval.turn.conversation.owner_id == user.pk


def decide_approval(*, approval_id: int, user, approve: bool) -> ToolApproval:
    approval = ToolApproval.objects.select_related("turn__conversation").get(pk=approval_id)
    if not may_decide(user, approval):
        raise PermissionDenied("You may not decide this approval.")
    status = ToolApproval.Status.APPROVED if approve else ToolApproval.Status.DENIED
    now = timezone.now()
    with transaction.atomic():
        decided = ToolApproval.objects.filter(
            pk=approval_id, status=ToolApproval.Status.PENDING, expires_at__gt=now
        ).update(status=status, decided_by=user, decided_at=now)
        if not decided:
            raise ApprovalClosed(f"This approval is already {approval_status(approval_id)}.")
        verb = "approved" if approve else "denied"
        emit(approval.turn_id, TurnEvent.Type.STATUS, phase="approval_decided", approval_id=approval_id,
             message=f"{'✅' if approve else '⛔'} {approval.tool_name} {verb} by {user.get_username()}",
             tool_name=approval.tool_name, decision=status)  # fmt: skip
        enqueue_turn(approval.turn_id)
    approval.refresh_from_db()
    return approval


def expire_approval(approval_id: int) -> bool:
    """Deny a pending approval whose time is up; resume its turn. False if it was decided."""
    with transaction.atomic():
        expired = ToolApproval.objects.filter(
            pk=approval_id, status=ToolApproval.Status.PENDING, expires_at__lte=timezone.now()
        ).update(status=ToolApproval.Status.EXPIRED, decided_at=timezone.now())
        if not expired:
            return False
        approval = ToolApproval.objects.get(pk=approval_id)
        emit(approval.turn_id, TurnEvent.Type.STATUS, phase="approval_decided", approval_id=approval_id,
             message=f"⌛ {approval.tool_name} was not approved in time: denied", tool_name=approval.tool_name,
             decision=ToolApproval.Status.EXPIRED)  # fmt: skip
        enqueue_turn(approval.turn_id)
    return True


def approval_status(approval_id: int) -> str:
    return ToolApproval.objects.filter(pk=approval_id).values_list("status", flat=True).first() or "gone"


def schedule_timeout(approval_id: int) -> None:
    schedule_approval_timeout(approval_id, settings.TOOLHUB_APPROVAL_TIMEOUT + 1)
