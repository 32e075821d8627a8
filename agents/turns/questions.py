"""An MCP server's question (elicitation/create) during a turn's tool call, asked of an operator in the console.

`ask_and_wait` (the turn's Caller.elicit awaits it on the MCP client's loop, agents.turns.sampling) stores a pending
ServerQuestion with the server's message and form and the tool call's remaining time as its deadline, emits a
status event with both (the conversation page shows the form, the SSE stream the status), and waits as a direct
/mcp call waits for its approval (looking at the row every POLL_SECONDS from a worker thread) until the question is
answered, declined, cancelled with its turn, withdrawn (the call stopped waiting) or out of time. Taken once, as an
approval is decided (agents.turns.approvals): each close is an UPDATE that only matches a pending row (and, for an
operator's answer, one within its deadline), and says so with a status event. Who answers: an operator with the
approve permission (approvals.PERMISSION, agents.access.abilities.ANSWER_QUESTION). The answer's form is checked
against the server's schema by agents.console.question_form before it comes here. Never talks to the MCP server.
"""

import asyncio
import dataclasses
import datetime
import json
import logging
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from agents.models import ServerQuestion, Turn, TurnEvent
from catalog.mcp_client.callers import in_worker_thread

from .approvals import PERMISSION as APPROVAL_PERMISSION
from .events import TurnTakenOver, emit

log = logging.getLogger(__name__)

PERMISSION = APPROVAL_PERMISSION  # answering a server's question is an intervention in a running turn, as approving
ASKED_PHASE = "question_asked"
CLOSED_PHASE = "question_closed"
POLL_SECONDS = 0.5
Status = ServerQuestion.Status


class QuestionClosed(Exception):
    """The question was already answered, declined, cancelled or out of time."""


@dataclasses.dataclass(frozen=True)
class Outcome:
    """How a question ended, as the server is told: "accept" with `content`, "decline" or "cancel"."""

    action: str
    content: dict[str, Any] | None = None


async def ask_and_wait(*, turn_id: int, attempt: int, message: str, schema: dict[str, Any], seconds: float) -> Outcome:
    """Ask the operator and wait (on the caller's event loop, for at most `seconds`); what the server is told. A turn
    no longer run by `attempt` (cancelled, taken over) is not asked: "cancel"."""
    try:
        question = await in_worker_thread(ask)(turn_id=turn_id, attempt=attempt, message=message, schema=schema,
                                         seconds=seconds)  # fmt: skip
    except TurnTakenOver:
        return Outcome("cancel")
    return await wait_for_answer(question.pk, turn_id=turn_id, attempt=attempt)


def ask(*, turn_id: int, attempt: int, message: str, schema: dict[str, Any], seconds: float) -> ServerQuestion:
    """Store the pending question and emit its status event, in one transaction, while `attempt` runs the turn."""
    expires_at = timezone.now() + datetime.timedelta(seconds=seconds)
    with transaction.atomic():
        question = ServerQuestion.objects.create(turn_id=turn_id, message=message[: ServerQuestion.MESSAGE_MAX_LENGTH],
                                                 requested_schema=schema, expires_at=expires_at)  # fmt: skip
        emit(turn_id, TurnEvent.Type.STATUS, phase=ASKED_PHASE, attempt=attempt, question_id=question.pk,
             message=f"❓ Waiting for an answer from the operator: {question.message[:200]}",
             question=question.message, schema=schema, expires_at=expires_at.isoformat())  # fmt: skip
    return question


async def wait_for_answer(question_id: int, *, turn_id: int, attempt: int) -> Outcome:
    """Wait until the question is closed, as a direct /mcp call waits for its approval
    (agents.mcp_gateway.call_approvals): looking every POLL_SECONDS, holding no thread or database connection in
    between. Cancelled (the tool call stopped waiting): the question is withdrawn."""
    try:
        while (outcome := await in_worker_thread(settle)(question_id, turn_id=turn_id, attempt=attempt)) is None:
            await asyncio.sleep(POLL_SECONDS)
    except asyncio.CancelledError:
        await asyncio.shield(in_worker_thread(withdraw)(question_id, turn_id=turn_id, attempt=attempt,
                                                  why="the tool call stopped waiting for it"))  # fmt: skip
        raise
    return outcome


def settle(question_id: int, *, turn_id: int, attempt: int) -> Outcome | None:
    """The question's outcome, or None while it waits. A pending one past its deadline is closed as expired here
    (declined), and one whose turn is no longer run by `attempt` as cancelled."""
    row = (ServerQuestion.objects.filter(pk=question_id)
           .values_list("status", "answer", "expires_at", "turn__status", "turn__attempt").first())  # fmt: skip
    if row is None:  # its turn was deleted (retention): nobody answers any more
        return Outcome("cancel")
    status, answer, expires_at, turn_status, turn_attempt = row
    if status != Status.PENDING:
        return outcome_of(status, answer)
    if turn_status != Turn.Status.RUNNING or turn_attempt != attempt:
        withdraw(question_id, turn_id=turn_id, attempt=attempt, why="its turn is no longer running")
    elif expires_at <= timezone.now():
        expire(question_id, turn_id=turn_id, attempt=attempt)
    else:
        return None
    status, answer = ServerQuestion.objects.filter(pk=question_id).values_list("status", "answer").get()
    return outcome_of(status, answer)  # what closed it: this, or an answer a moment before


def outcome_of(status: str, answer: dict[str, Any] | None) -> Outcome:
    if status == Status.ANSWERED:
        return Outcome("accept", answer or {})
    if status in (Status.DECLINED, Status.EXPIRED):
        return Outcome("decline")
    return Outcome("cancel")


def current_status(question_id: int) -> str:
    return ServerQuestion.objects.filter(pk=question_id).values_list("status", flat=True).first() or "gone"


def answer_question(*, question_id: int, user: User, content: dict[str, Any]) -> ServerQuestion:
    """The operator's answer (already checked against the form: agents.console.question_form), taken once."""
    return _close_by(question_id, user=user, status=Status.ANSWERED, answer=content)


def decline_question(*, question_id: int, user: User) -> ServerQuestion:
    return _close_by(question_id, user=user, status=Status.DECLINED, answer=None)


def _close_by(question_id: int, *, user: User, status: str, answer: dict[str, Any] | None) -> ServerQuestion:
    now = timezone.now()
    name = user.get_username()
    with transaction.atomic():
        closed = ServerQuestion.objects.filter(pk=question_id, status=Status.PENDING, expires_at__gt=now).update(
            status=status, answer=answer, answered_by=user, answered_at=now
        )
        if not closed:
            raise QuestionClosed(f"This question is already {closed_word(current_status(question_id))}.")
        question = ServerQuestion.objects.get(pk=question_id)
        if status == Status.ANSWERED:
            message = f"💬 {name} answered the server's question: {answer_text(answer)}"
        else:
            message = f"🚫 {name} declined the server's question"
        emit(question.turn_id, TurnEvent.Type.STATUS, phase=CLOSED_PHASE, question_id=question_id, decision=status,
             message=message, answered_by=name)  # fmt: skip
    return question


def expire(question_id: int, *, turn_id: int, attempt: int) -> bool:
    """Close a pending question whose time is up (the server is told declined); False if it was closed first."""
    with transaction.atomic():
        if not ServerQuestion.objects.filter(pk=question_id, status=Status.PENDING).update(
            status=Status.EXPIRED, answered_at=timezone.now()
        ):
            return False
        log.warning("question %s of turn %s expired: no operator answered within the tool call's time "
                    "(TOOLHUB_MCP_TIMEOUT); the server was told declined", question_id, turn_id)  # fmt: skip
        message = "⌛ No operator answered the server's question within the tool call's time: declined"
        try:
            emit(turn_id, TurnEvent.Type.STATUS, phase=CLOSED_PHASE, attempt=attempt, question_id=question_id,
                 decision=Status.EXPIRED, message=message)  # fmt: skip
        except TurnTakenOver:
            pass  # the turn ended meanwhile: the question stays expired, its turn shows no more events
    return True


def withdraw(question_id: int, *, turn_id: int, attempt: int, why: str) -> bool:
    """Close a pending question nobody waits for any more as cancelled (the server, if still there, is told
    cancel), with an event while `attempt` still runs the turn; False if it was closed first."""
    with transaction.atomic():
        if not ServerQuestion.objects.filter(pk=question_id, status=Status.PENDING).update(
            status=Status.CANCELLED, answered_at=timezone.now()
        ):
            return False
        log.info("question %s of turn %s withdrawn: %s", question_id, turn_id, why)
        try:
            emit(turn_id, TurnEvent.Type.STATUS, phase=CLOSED_PHASE, attempt=attempt, question_id=question_id,
                 decision=Status.CANCELLED, message=f"⏹ The server's question was withdrawn: {why}")  # fmt: skip
        except TurnTakenOver:
            pass  # the turn ended or was taken over: it shows no more events of this run
    return True


def cancel_pending(*, turn_id: int, user: User) -> list[int]:
    """Close the turn's pending questions as cancelled with it, each with an event saying so. Runs inside the cancel's
    transaction, before the turn ends (agents.turns.cancellation)."""
    name = user.get_username()
    with transaction.atomic():
        pending = list(
            ServerQuestion.objects.select_for_update()
            .filter(turn_id=turn_id, status=Status.PENDING)
            .values_list("pk", flat=True)
        )
        ServerQuestion.objects.filter(pk__in=pending).update(
            status=Status.CANCELLED, answered_by=user, answered_at=timezone.now()
        )
        for question_id in pending:
            emit(turn_id, TurnEvent.Type.STATUS, phase=CLOSED_PHASE, question_id=question_id,
                 decision=Status.CANCELLED, message=f"⏹ The server's question was cancelled with the turn by {name}",
                 answered_by=name)  # fmt: skip
    return pending


def closed_word(status: str) -> str:
    """Why a question takes no answer; one still pending is past its deadline (its waiter closes it soon)."""
    words: dict[str, str] = {Status.ANSWERED: "answered", Status.DECLINED: "declined", Status.EXPIRED: "out of time",
                             Status.PENDING: "out of time", Status.CANCELLED: "cancelled with its turn"}  # fmt: skip
    return words.get(status, status)


def answer_text(answer: dict[str, Any] | None) -> str:
    """An answer as the timeline shows it: its fields as JSON, cut to 300 characters."""
    text = json.dumps(answer or {}, ensure_ascii=False)
    return text if len(text) <= 300 else text[:299] + "…"
