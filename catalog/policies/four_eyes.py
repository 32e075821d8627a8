"""Four eyes: which risk levels need a second person, and policy changes that wait for a second operator.

At a covered risk level (TOOLHUB_FOUR_EYES_RISKS and every level above one of them) whoever started a turn cannot
approve its tool calls (agents.turns.approvals asks `covers`), and a policy change that loosens a covered tool
(lowers its risk, removes its confirmation, adds domains) is kept as a pending PolicyChangeRequest until another
operator approves it; tightening changes are saved at once. Requests and decisions go to the audit log and stay as
rows. Never reads agents' models; never edits a PolicyVersion (applying saves a new one through versions.py).
"""

import logging

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone

from catalog.models import PolicyChangeRequest, PolicyVersion, Risk, Tool

from .versions import PolicyConflict, Snapshot, save_policy_draft

audit = logging.getLogger("toolhub.audit")

RISK_ORDER = tuple(Risk.values)  # low < medium < high < critical


class ChangeRequestClosed(Exception):
    """The change request was already decided, or another change of the tool is already waiting."""


class SameOperator(PermissionDenied):
    """The operator who asked for a change cannot approve it."""


def _rank(risk: str) -> int:
    return RISK_ORDER.index(risk) if risk in RISK_ORDER else len(RISK_ORDER)  # an unknown level counts as the highest


def covers(risk: str) -> bool:
    """Whether four eyes apply at `risk`: a configured level, or one above a configured level."""
    levels = settings.TOOLHUB_FOUR_EYES_RISKS
    return bool(levels) and _rank(risk) >= min(_rank(level) for level in levels)


def loosening(current: Snapshot | None, draft: Snapshot) -> list[str]:
    """Why saving `draft` over `current` (snapshots) needs a second operator; [] when it may be saved at once.

    Covered is the tool's risk before or after the change, so a change cannot slip out of four eyes by raising the
    risk first. A tool's first policy has nothing to loosen.
    """
    if current is None or not (covers(current["risk"]) or covers(draft["risk"])):
        return []
    reasons: list[str] = []
    if _rank(draft["risk"]) < _rank(current["risk"]):
        reasons.append(f"lowers the risk from {current['risk']} to {draft['risk']}")
    if current["requires_confirmation"] and not draft["requires_confirmation"]:
        reasons.append("removes the confirmation of its calls")
    added = sorted(set(draft["domains"]) - set(current["domains"]))
    if added:
        reasons.append(f"adds the domain{'s' if len(added) > 1 else ''} {', '.join(added)}")
    return reasons


def request_change(tool: Tool, *, draft: Snapshot, reasons: list[str], author: User, note: str,
                   base_version: int) -> PolicyChangeRequest:  # fmt: skip
    """Keep `draft` as a pending change of the tool's policy. ChangeRequestClosed when one is already waiting;
    PolicyConflict when the policy moved since the editor opened it."""
    try:
        with transaction.atomic():
            Tool.objects.select_for_update().filter(pk=tool.pk).first()
            active = Tool.objects.filter(pk=tool.pk).values_list("policy__version", flat=True).first() or 0
            if active != base_version:
                raise PolicyConflict(
                    f"The policy of {tool.name} changed to version {active} since you opened it (version "
                    f"{base_version}); reload and edit again."
                )
            change = PolicyChangeRequest.objects.create(
                tool=tool, draft=draft, reasons=reasons, note=note, base_version=base_version, requested_by=author
            )
    except IntegrityError:
        raise ChangeRequestClosed(
            f"Another change of {tool.name}'s policy is already waiting for a second operator: approve or reject it "
            "first."
        ) from None
    audit.info("policy change %s of %s requested by %s (%s): waits for a second operator", change.pk, tool.name,
               author, "; ".join(reasons))  # fmt: skip
    return change


def pending_change(tool: Tool) -> PolicyChangeRequest | None:
    return PolicyChangeRequest.objects.filter(tool=tool, status=PolicyChangeRequest.Status.PENDING).first()


def pending_changes() -> QuerySet[PolicyChangeRequest]:
    """Every change waiting for a second operator, oldest first (the policies page lists them)."""
    return (
        PolicyChangeRequest.objects.filter(status=PolicyChangeRequest.Status.PENDING)
        .select_related("tool", "requested_by")
        .order_by("requested_at", "id")
    )


def may_approve(user: User, change: PolicyChangeRequest) -> bool:
    """Whether `user` (who may edit policies) may approve it: anyone but the operator who asked."""
    return change.requested_by_id is None or change.requested_by_id != user.pk


@transaction.atomic
def decide_change(*, change_id: int, user: User, approve: bool) -> PolicyChangeRequest:
    """Apply (a new PolicyVersion authored by the requester) or reject a pending change; taken once.

    SameOperator when the requester approves their own change (rejecting it is theirs to do);
    ChangeRequestClosed when it was decided already; PolicyConflict when the policy moved since it was asked for
    (it stays pending: reject it and ask again).
    """
    change = PolicyChangeRequest.objects.select_for_update().select_related("tool", "requested_by").get(pk=change_id)
    if change.status != PolicyChangeRequest.Status.PENDING:
        raise ChangeRequestClosed(f"This change was already {change.status}.")
    if approve and not may_approve(user, change):
        raise SameOperator("You asked for this change: another operator must approve it.")
    change.decided_by, change.decided_at = user, timezone.now()
    if approve:
        version = save_policy_draft(change.tool, draft=change.draft, author=change.requested_by,
                                    note=approved_note(change, user), base_version=change.base_version)  # fmt: skip
        change.status, change.version = PolicyChangeRequest.Status.APPLIED, version.number
    else:
        change.status = PolicyChangeRequest.Status.REJECTED
    change.save(update_fields=["status", "decided_by", "decided_at", "version"])
    audit.info("policy change %s of %s %s by %s (requested by %s)%s", change.pk, change.tool.name, change.status,
               user, change.requested_by, f": version {change.version}" if change.version else "")  # fmt: skip
    return change


def approved_note(change: PolicyChangeRequest, user: User) -> str:
    """The version's note: the requester's, and who approved it (the version's author is the requester)."""
    return f"{change.note} (approved by {user.get_username()})"[: PolicyVersion._meta.get_field("note").max_length]
