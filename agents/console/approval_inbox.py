"""The approvals inbox: every tool call, MCP server's question and policy change waiting for a person, soonest
deadline first.

Reads only, for the inbox page and the navigation's count; deciding goes through agents.turns.approvals and
catalog.policies.four_eyes (the views those already have). Never writes.
"""

from django.db.models import Value
from django.utils import timezone

from agents.models import ServerQuestion, ToolApproval
from catalog.models import PolicyChangeRequest
from catalog.policies.four_eyes import may_approve, pending_changes

from .fragments import approval_card, question_card_of

VIEW_TURNS = "agents.view_turn"
VIEW_POLICIES = "catalog.view_toolpolicy"
EDIT_POLICIES = "catalog.change_toolpolicy"


def waiting_approvals(*, now=None):
    """Pending tool-call approvals still within their deadline (a later one is expired by its timeout task)."""
    now = now or timezone.now()
    return ToolApproval.objects.filter(status=ToolApproval.Status.PENDING, expires_at__gt=now)


def tool_call_rows(user, *, now=None) -> list[dict]:
    """Each waiting call's card, who started its turn and where (conversation and turn), soonest deadline first."""
    approvals = waiting_approvals(now=now).select_related("turn__conversation__owner").order_by("expires_at", "id")
    return [
        {
            "approval": approval_card(approval),
            **_where(approval.turn),
            # four eyes: the one who started the turn may deny its risky call but not approve it
            "own": approval.turn.conversation.owner_id == user.pk,
            "requested_at": approval.requested_at,
        }
        for approval in approvals
    ]


def _where(turn) -> dict:
    """The turn a card belongs to, its conversation and who started it (the turn with its conversation and owner)."""
    conversation = turn.conversation
    return {"turn_id": turn.pk, "conversation_id": conversation.pk,
            "conversation": conversation.title or f"conversation {conversation.pk}",
            "started_by": conversation.owner.get_username()}  # fmt: skip


def waiting_questions(*, now=None):
    """MCP servers' questions still within their deadline (a later one is closed by the call that waits for it)."""
    now = now or timezone.now()
    return ServerQuestion.objects.filter(status=ServerQuestion.Status.PENDING, expires_at__gt=now)


def question_rows(*, now=None) -> list[dict]:
    """Each waiting question's card, who started its turn and where, soonest deadline first."""
    waiting = waiting_questions(now=now).select_related("turn__conversation__owner").order_by("expires_at", "id")
    return [
        {"question": question_card_of(question), **_where(question.turn), "asked_at": question.asked_at}
        for question in waiting
    ]


def policy_change_rows(user) -> list[dict]:
    """Each policy change waiting for a second operator, oldest first, and whether `user` may approve it."""
    may_edit = user.has_perm(EDIT_POLICIES)
    return [{"change": change, "may_approve": may_edit and may_approve(user, change)} for change in pending_changes()]


def waiting_count(user) -> int:
    """What the navigation's Approvals entry counts, in one query: the calls, servers' questions and policy changes
    this user may see waiting."""
    parts = []
    if user.has_perm(VIEW_TURNS):
        parts.append(waiting_approvals().order_by().values_list(Value(1)))
        parts.append(waiting_questions().order_by().values_list(Value(1)))
    if user.has_perm(VIEW_POLICIES):
        pending = PolicyChangeRequest.objects.filter(status=PolicyChangeRequest.Status.PENDING)
        parts.append(pending.order_by().values_list(Value(1)))
    if not parts:
        return 0
    return parts[0].union(*parts[1:], all=True).count() if len(parts) > 1 else parts[0].count()
