"""An operator cancels an unfinished turn: it ends as cancelled, and whatever still runs it stops.

The turn ends as a failed one does (lifecycle.end_turn), in one transaction: its pending approvals and MCP servers'
questions closed as cancelled with it (approvals.cancel_pending, questions.cancel_pending: no decision reaches an
ended turn, the card and timeline say so, and a server waiting for an answer is told cancelled), its
status, its open tool calls answered, its error and done events. The run
that held it stops at its next step boundary: it may not store an event or a message once the turn is no longer
running (agents.turns.events.emit, TurnRun.save_message), so a streaming model call ends at its next chunk and a pending
tool call never starts. What it stored stays, so the next turn's model knows what ran before the cancel. Never runs
a turn.
"""

from django.contrib.auth.models import User
from django.db import transaction

from agents.models import Turn

from .approvals import PERMISSION as APPROVAL_PERMISSION
from .approvals import cancel_pending
from .events import FailureReason
from .lifecycle import end_turn
from .questions import cancel_pending as cancel_pending_questions

# Cancelling a turn is an operator's intervention on a running turn, as deciding its approvals is.
PERMISSION = APPROVAL_PERMISSION
CANCELLED_PHASE = "cancelled"  # the phase of a cancelled turn's error event (the console's timeline shows it)


def cancel_turn(*, turn_id: int, user: User) -> bool:
    """Cancel the turn if it has not ended; False when it had (done, failed or already cancelled)."""
    name = user.get_username()
    with transaction.atomic():
        # The turn's row is locked first, so its approvals close as cancelled only when this cancel ends it.
        unfinished = Turn.objects.select_for_update().filter(pk=turn_id).exclude(status__in=Turn.ENDED)
        if unfinished.values_list("pk", flat=True).first() is None:
            return False
        cancel_pending(turn_id=turn_id, user=user)
        cancel_pending_questions(turn_id=turn_id, user=user)
        return end_turn(turn_id, Turn.Status.CANCELLED, FailureReason.CANCELLED, f"⏹ Cancelled by {name}",
                        detail=f"cancelled by {name}", phase=CANCELLED_PHASE)  # fmt: skip
