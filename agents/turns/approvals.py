"""Approval of risky tool calls: request, decide, expire. The turn waits without holding a worker.

A call whose policy requires confirmation becomes a pending ToolApproval and
the turn pauses (status waiting). A decision (an operator with the
decide_toolapproval permission, or the conversation's owner through the API)
or the timeout resumes the turn from a new task. No decision in time means
denied. A decision is taken once: the UPDATE only matches a pending row. A denial may carry a reason, stored with the
approval and told to the model as the call's result (`refusal`). Cancelling the turn closes its pending approvals as
cancelled (`cancel_pending`), never as expired.

Four eyes (catalog.policies.four_eyes): at a covered risk level the person who started the turn, in the console or
with any of their API keys (a turn's starter is its conversation's owner: only the owner adds turns, and a key acts
as its user), cannot approve its calls (FourEyes); they may still deny them.
"""

import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from agents.models import ToolApproval, TurnEvent
from catalog.policies import four_eyes

from .dispatch import enqueue_turn, schedule_approval_timeout
from .events import emit

PERMISSION = "agents.decide_toolapproval"


class ApprovalClosed(Exception):
    """The approval was already decided or has expired."""


class BadReason(ValueError):
    """A deny reason too long to store (ToolApproval.REASON_MAX_LENGTH)."""


class FourEyes(PermissionDenied):
    """The person who started the turn may not approve its call at a four-eyes risk level."""


def request_approval(
    *, turn_id: int, tool_call_id: str, tool_name: str, arguments: dict[str, Any], risk: str
) -> ToolApproval:
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
             approvers=approvers(risk))  # fmt: skip
        transaction.on_commit(lambda: schedule_timeout(approval.pk))
    return approval


def approvers(risk: str) -> str:
    """Who may approve a call at `risk`, as the approval_required event says it."""
    if four_eyes.covers(risk):
        return "operators with the approve permission other than the one who started the turn (who may only deny it)"
    return "operators with the approve permission, or the conversation's owner"


def may_decide(user: User, approval: ToolApproval) -> bool:
    return user.has_perm(PERMISSION) or started_the_turn(user, approval)


def started_the_turn(user: User, approval: ToolApproval) -> bool:
    return approval.turn.conversation.owner_id == user.pk


def needs_another_approver(user: User, approval: ToolApproval) -> bool:
    """Whether `user` may deny this call but not approve it (four eyes: they started its turn)."""
    return four_eyes.covers(approval.risk) and started_the_turn(user, approval)


def approval_to_decide(*, approval_id: int, user: User) -> ToolApproval:
    """The approval `user` may decide. PermissionDenied for one they may not, whether it exists or not, so ids
    cannot be probed; ToolApproval.DoesNotExist only to a user who may decide every approval."""
    approval = ToolApproval.objects.select_related("turn__conversation").filter(pk=approval_id).first()
    if approval is None and user.has_perm(PERMISSION):
        raise ToolApproval.DoesNotExist(f"No approval {approval_id}.")
    if approval is None or not may_decide(user, approval):
        raise PermissionDenied("You may not decide this approval.")
    return approval


def decide_approval(*, approval_id: int, user: User, approve: bool, reason: str = "") -> ToolApproval:
    """Approve or deny (with an optional `reason`, kept only for a denial) a pending approval, once."""
    reason = reason.strip() if not approve else ""
    if len(reason) > ToolApproval.REASON_MAX_LENGTH:
        raise BadReason(f"A reason has at most {ToolApproval.REASON_MAX_LENGTH} characters.")
    approval = approval_to_decide(approval_id=approval_id, user=user)
    if approve and needs_another_approver(user, approval):
        raise FourEyes(
            f"{approval.tool_name} is a {approval.risk}-risk call of a turn you started: it needs another operator's "
            "approval (you may deny it)."
        )
    status = ToolApproval.Status.APPROVED if approve else ToolApproval.Status.DENIED
    now = timezone.now()
    with transaction.atomic():
        decided = ToolApproval.objects.filter(
            pk=approval_id, status=ToolApproval.Status.PENDING, expires_at__gt=now
        ).update(status=status, decided_by=user, decided_at=now, reason=reason)
        if not decided:
            raise ApprovalClosed(f"This approval is already {approval_status(approval_id)}.")
        verb = "approved" if approve else "denied"
        message = f"{'✅' if approve else '⛔'} {approval.tool_name} {verb} by {user.get_username()}"
        emit(approval.turn_id, TurnEvent.Type.STATUS, phase="approval_decided", approval_id=approval_id,
             message=message + (f": {reason}" if reason else ""), tool_name=approval.tool_name, decision=status,
             reason=reason)  # fmt: skip
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


def cancel_pending(*, turn_id: int, user: User) -> list[ToolApproval]:
    """Close the turn's pending approvals as cancelled with it, each with an event saying so (the card and the
    timeline show it). Runs inside the cancel's transaction, before the turn ends (agents.turns.cancellation)."""
    name = user.get_username()
    with transaction.atomic():
        pending = list(
            ToolApproval.objects.select_for_update().filter(turn_id=turn_id, status=ToolApproval.Status.PENDING)
        )
        ToolApproval.objects.filter(pk__in=[approval.pk for approval in pending]).update(
            status=ToolApproval.Status.CANCELLED, decided_by=user, decided_at=timezone.now()
        )
        for approval in pending:
            emit(turn_id, TurnEvent.Type.STATUS, phase="approval_decided", approval_id=approval.pk,
                 message=f"⏹ {approval.tool_name} cancelled with the turn by {name}", tool_name=approval.tool_name,
                 decision=ToolApproval.Status.CANCELLED)  # fmt: skip
    return pending


def refusal(tool_name: str, approval: ToolApproval | None) -> str:
    """What the model is told about a call that did not run for want of an approval (its tool result's error)."""
    if approval is not None and approval.status == ToolApproval.Status.DENIED:
        why = "was denied by an operator" + (f" (reason: {approval.reason})" if approval.reason else "")
    else:
        why = "was not approved in time, so it was denied"
    return f"{tool_name} did not run: the call {why}."


def approval_status(approval_id: int) -> str:
    return ToolApproval.objects.filter(pk=approval_id).values_list("status", flat=True).first() or "gone"


def schedule_timeout(approval_id: int) -> None:
    schedule_approval_timeout(approval_id, settings.TOOLHUB_APPROVAL_TIMEOUT + 1)
