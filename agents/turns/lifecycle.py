"""A turn's lease and its early end: what the runtime, the watchdog and an operator's cancel share.

A running turn holds a lease: the run that claimed it (`Turn.attempt`) beats
`Turn.heartbeat_at` every TOOLHUB_TURN_LEASE / 6 seconds (`lease_held`) until
`Turn.deadline_at` (`deadline_from`). A turn that must end before its answer
(failed, or cancelled by an operator) ends through `end_turn`, once, in one
transaction. Never runs, restarts or enqueues a turn (agents.turns.watchdog
decides restarts, agents.turns.dispatch enqueues them).
"""

import datetime
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.db import connection, transaction
from django.db.models import BigIntegerField, Expression, OuterRef, Q, Subquery, Sum, Value
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Coalesce
from django.utils import timezone

from agents.models import Message, ToolApproval, Turn, TurnEvent

from .events import emit, held_turn
from .memory import message_tokens

log = logging.getLogger(__name__)
EventType = TurnEvent.Type


def lease() -> datetime.timedelta:
    return datetime.timedelta(seconds=settings.TOOLHUB_TURN_LEASE)


def deadline_from(start: datetime.datetime) -> datetime.datetime:
    return start + datetime.timedelta(seconds=settings.TOOLHUB_TURN_TIME_LIMIT)


@contextmanager
def lease_held(turn_id: int, attempt: int) -> Iterator[None]:
    """Beat the turn's heartbeat from a thread while the block runs (the run itself may wait on a model)."""
    stop = threading.Event()

    def beat() -> None:
        try:
            while not stop.wait(settings.TOOLHUB_TURN_LEASE / 6):
                held_turn(turn_id, attempt).update(heartbeat_at=timezone.now())
                connection.close()  # back to the pool between beats
        except Exception:  # a missed beat only makes the turn look stalled sooner; never kill the run
            log.warning("heartbeat of turn %s stopped", turn_id, exc_info=True)
        finally:
            connection.close()

    thread = threading.Thread(target=beat, name=f"turn-{turn_id}-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()


def fail_turn(turn_id: int, reason: str, message: str, *, detail: str = "", attempt: int | None = None) -> bool:
    """Mark the unfinished turn failed (end_turn); False when it had already ended (or, with `attempt`, when
    another run holds it)."""
    return end_turn(turn_id, Turn.Status.FAILED, reason, message, detail=detail, attempt=attempt)


# What one model call was sent, as its budget event records it (agents/turns/budget.py's parts less the reserve): the
# system prompt, tool schemas, knowledge and the conversation of that step.
PROMPT_PARTS = ("system", "tools", "knowledge", "memory")
PROMPT_SENT = sum((Cast(KT(f"payload__{part}"), BigIntegerField()) for part in PROMPT_PARTS), start=Value(0))


def spent(*, unsaved_completion: int = 0) -> dict[str, Expression]:
    """For the UPDATE that ends a turn: its prompt tokens (its budget events summed) and completion tokens (its
    assistant messages, plus `unsaved_completion` for an answer stored after the update), read by the update itself."""
    turn = OuterRef("pk")
    sent = (TurnEvent.objects.filter(turn=turn, type=TurnEvent.Type.ROUTING, phase="budget").order_by()
            .values("turn").annotate(total=Sum(PROMPT_SENT)).values("total"))  # fmt: skip
    wrote = (Message.objects.filter(turn=turn, role=Message.Role.ASSISTANT).order_by()
             .values("turn").annotate(total=Sum("tokens")).values("total"))  # fmt: skip
    return {
        "prompt_tokens": Coalesce(Subquery(sent), Value(0)),
        "completion_tokens": Coalesce(Subquery(wrote), Value(0)) + Value(unsaved_completion),
    }


def end_turn(turn_id: int, status: str, reason: str, message: str, *, detail: str = "", phase: str = "error",
             attempt: int | None = None) -> bool:  # fmt: skip
    """End the unfinished turn early (failed, or cancelled by an operator), in one transaction: its status and
    error, its pending approvals closed (nothing will resume it), its open tool calls answered, its error and
    done events. False when it had already ended (or, with `attempt`, when another run holds it)."""
    unfinished = ~Q(status__in=Turn.ENDED)
    owned = Q(attempt=attempt) if attempt is not None else Q()
    now = timezone.now()
    with transaction.atomic():
        updated = Turn.objects.filter(unfinished & owned, pk=turn_id).update(
            status=status, error=detail or message, finished_at=now, **spent()
        )
        if not updated:
            return False
        ToolApproval.objects.filter(turn_id=turn_id, status=ToolApproval.Status.PENDING).update(
            status=ToolApproval.Status.EXPIRED, decided_at=now
        )
        answer_open_tool_calls(turn_id, message)
        emit(turn_id, EventType.ERROR, phase=phase, message=message, reason=reason, detail=detail or message)
        emit(turn_id, EventType.DONE, phase="done", status=status)
    return True


def answer_open_tool_calls(turn_id: int, message: str) -> None:
    """The ended turn's tool calls that have no result get one saying so (a failed or cancelled turn): the
    conversation's next turn sends a valid transcript (every call answered, agents.turns.memory), and its model knows
    what ran and that an unanswered call may have run."""
    messages = list(Message.objects.filter(turn_id=turn_id).order_by("id"))
    answered = {m.tool_call_id for m in messages if m.role == Message.Role.TOOL}
    for assistant in (m for m in messages if m.role == Message.Role.ASSISTANT and m.tool_calls):
        for call in assistant.tool_calls:
            if call.get("id") and call["id"] not in answered:
                name = (call.get("function") or {}).get("name", "the tool")
                content = (f"No result: the turn ended while {name} ran ({message}). The call may or may not have "
                           "taken effect; check before doing it again.")  # fmt: skip
                tool = {"role": Message.Role.TOOL, "tool_call_id": call["id"], "content": content}
                Message.objects.create(conversation_id=assistant.conversation_id, turn_id=turn_id,
                                       tokens=message_tokens(tool), **tool)  # fmt: skip
