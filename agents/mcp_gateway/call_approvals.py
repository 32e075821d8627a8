"""A direct /mcp call whose policy requires confirmation: asked, waited for and settled on agents.turns.approvals' path.

The call is recorded as a turn of its own (a conversation of the key's owner titled "MCP call: <tool>"), so its
approval is the ToolApproval a chat turn asks for: announced by the same approval_required event, shown in the
console's conversation, decided there or with POST /v1/approvals/<id> by whoever may decide it (four eyes included),
and denied when TOOLHUB_APPROVAL_TIMEOUT passes. The /mcp request waits for the decision (looking every
POLL_SECONDS, holding no database connection in between) and runs the call only once approved; the result is stored
on the turn. The turn is stored as ended from the start, so the worker agents.turns.approvals wakes on a decision
finds nothing to run: only the waiting request runs the call, once (the tool message is written under the
approval's row lock before the call runs). A caller that stops waiting withdraws its approval (expired).
Never runs a tool; never lets an approval run another call (tool, arguments or owner) than the one it was asked for.
"""

from __future__ import annotations

import asyncio
import json
import uuid

from channels.db import database_sync_to_async
from django.db import transaction
from django.utils import timezone

from agents.models import ApiKey, Conversation, Message, ToolApproval, Turn, TurnEvent
from agents.turns import approvals
from agents.turns.events import emit
from agents.turns.tool_calls import CallOutcome

from .direct_calls import ToolRefused

POLL_SECONDS = 1.0
TURN_MODEL = "direct call over /mcp"  # what the console shows as the turn's model: no model runs it
PHASE = "mcp_call"


class ApprovalNeeded(Exception):
    """The call waits for approval `approval_id`; the message says where it is decided."""

    def __init__(self, message: str, approval_id: int):
        super().__init__(message)
        self.approval_id = approval_id


def ask(*, name: str, arguments: dict, api_key_id: int, risk: str) -> ApprovalNeeded:
    """Record the call as an ended turn of the key's owner and ask for its approval; the exception to raise."""
    api_key = ApiKey.objects.select_related("user").get(pk=api_key_id)
    call_id = f"mcp-{uuid.uuid4().hex}"
    now = timezone.now()
    with transaction.atomic():
        conversation = Conversation.objects.create(
            owner=api_key.user, title=f"MCP call: {name}"[:200], channel=Conversation.Channel.MCP, api_key=api_key,
            api_key_name=api_key.name,
        )  # fmt: skip
        turn = Turn.objects.create(conversation=conversation, status=Turn.Status.DONE, model=TURN_MODEL,
                                   two_stage=False, started_at=now, finished_at=now)  # fmt: skip
        raw = {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
        Message.objects.create(conversation=conversation, turn=turn, role=Message.Role.ASSISTANT, tool_calls=[raw])
        emit(turn.pk, TurnEvent.Type.STATUS, phase=PHASE, tool_name=name, api_key=api_key.name,
             message=f"🔌 {name} called by name over /mcp with the API key {api_key.name}")  # fmt: skip
        approval = approvals.request_approval(
            turn_id=turn.pk, tool_call_id=call_id, tool_name=name, arguments=arguments, risk=risk
        )
    return ApprovalNeeded(
        f"{name} needs approval: its policy requires an operator's approval (risk {risk}). Approval {approval.pk} is "
        f'pending: decide it in the toolhub console (conversation "MCP call: {name}") or with POST '
        f"/v1/approvals/{approval.pk}; the call runs once approved.",
        approval.pk,
    )


def _status_now(approval_id: int) -> str:
    """The approval's status; a pending one past its time is expired here, as its timer would (the same update)."""
    approval = ToolApproval.objects.filter(pk=approval_id).only("status", "expires_at").first()
    if approval is None:
        return "gone"
    if approval.status == ToolApproval.Status.PENDING and approval.expires_at <= timezone.now():
        approvals.expire_approval(approval_id)
        return approvals.approval_status(approval_id)
    return approval.status


def withdraw(approval_id: int) -> None:
    """The caller stopped waiting: a still pending approval expires, so nobody approves a call that cannot run."""
    with transaction.atomic():
        now = timezone.now()
        if ToolApproval.objects.filter(pk=approval_id, status=ToolApproval.Status.PENDING).update(
            status=ToolApproval.Status.EXPIRED, decided_at=now
        ):
            approval = ToolApproval.objects.get(pk=approval_id)
            emit(approval.turn_id, TurnEvent.Type.STATUS, phase="approval_decided", approval_id=approval_id,
                 message=f"⌛ {approval.tool_name}: the MCP client stopped waiting, so it was withdrawn",
                 tool_name=approval.tool_name, decision=ToolApproval.Status.EXPIRED)  # fmt: skip


async def wait_for_decision(approval_id: int) -> str:
    """Wait until the approval is decided or expired; its status. Cancelled (the client went away): withdrawn."""
    try:
        while (status := await database_sync_to_async(_status_now)(approval_id)) == ToolApproval.Status.PENDING:
            await asyncio.sleep(POLL_SECONDS)
    except asyncio.CancelledError:
        await asyncio.shield(database_sync_to_async(withdraw)(approval_id))
        raise
    return status


def claim(approval_id: int, *, name: str, arguments: dict, api_key_id: int) -> tuple[ToolApproval, int]:
    """(the approval, the tool message to fill) when this approved call may run now; ToolRefused saying why not.

    The tool message is written under the approval's row lock: a second claim of the same approval finds it.
    """
    owner_id = ApiKey.objects.filter(pk=api_key_id).values_list("user_id", flat=True).first()
    with transaction.atomic():
        approval = (
            ToolApproval.objects.select_for_update(of=("self",)).select_related("turn__conversation", "decided_by")
            .filter(pk=approval_id).first()
        )  # fmt: skip
        if (
            approval is None
            or (approval.tool_name, approval.arguments) != (name, arguments)
            or (approval.turn.conversation.owner_id != owner_id)
        ):
            raise ToolRefused(f"Approval {approval_id} is for another call; {name} was not run.")
        if approval.status == ToolApproval.Status.PENDING:
            raise ToolRefused(f"{name} needs approval, and approval {approval_id} is still pending; it was not run.")
        if approval.status == ToolApproval.Status.DENIED:
            who = approval.decided_by.get_username() if approval.decided_by else "an operator"
            reason = f": {approval.reason}" if approval.reason else ""
            raise ToolRefused(
                f"{name} needs approval, and {who} denied it (approval {approval_id}{reason}); it was not run."
            )
        if approval.status == ToolApproval.Status.CANCELLED:
            raise ToolRefused(
                f"{name} needs approval, and its turn was cancelled (approval {approval_id}); it was not run."
            )
        if approval.status != ToolApproval.Status.APPROVED:
            raise ToolRefused(
                f"{name} needs approval, and it was not approved in time (approval {approval_id}); it was not run."
            )
        answers = Message.objects.filter(turn=approval.turn, role=Message.Role.TOOL)
        if answers.filter(tool_call_id=approval.tool_call_id).exists():
            raise ToolRefused(f"Approval {approval_id} was already used: {name} ran once for it.")
        message = Message.objects.create(conversation=approval.turn.conversation, turn=approval.turn,
                                         role=Message.Role.TOOL, tool_call_id=approval.tool_call_id)  # fmt: skip
        emit(approval.turn_id, TurnEvent.Type.TOOL_CALL, phase="tool", tool_name=name, arguments=arguments)
    return approval, message.pk


def settle(approval: ToolApproval, message_id: int, outcome: CallOutcome) -> None:
    """Store what the approved call answered on its turn, and end the turn's timeline."""
    with transaction.atomic():
        Message.objects.filter(pk=message_id).update(content=outcome.content, result=outcome.result)
        Turn.objects.filter(pk=approval.turn_id).update(finished_at=timezone.now())
        emit(approval.turn_id, TurnEvent.Type.TOOL_RESULT, phase="tool", tool_name=approval.tool_name,
             arguments=approval.arguments, is_error=outcome.is_error, refused=outcome.refused,
             content=outcome.content[:2000])  # fmt: skip
        emit(approval.turn_id, TurnEvent.Type.DONE, phase="done", status=Turn.Status.DONE, content="",
             finish_reason="stop")  # fmt: skip
