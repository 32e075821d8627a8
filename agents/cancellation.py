"""An operator cancels an unfinished turn: it ends as cancelled, and whatever still runs it stops.

The turn's row moves to cancelled in the same transaction as its error and done events. The run that held it
stops at its next step boundary: it may not store an event or a message once the turn is no longer running
(agents.events.emit, TurnRun.save_message), so a streaming model call ends at its next chunk and a pending tool
call never starts. What it stored stays, and a tool call it left without a result gets one saying so
(watchdog.answer_open_tool_calls, as for a failed turn): the next turn's transcript is valid and its model knows
what ran before the cancel. Never runs a turn.
"""

from django.db import transaction
from django.utils import timezone

from .approvals import PERMISSION as APPROVAL_PERMISSION
from .events import FailureReason, emit
from .models import Turn, TurnEvent
from .watchdog import answer_open_tool_calls

# Cancelling a turn is an operator's intervention on a running turn, as deciding its approvals is.
PERMISSION = APPROVAL_PERMISSION


def cancel_turn(*, turn_id: int, user) -> bool:
    """Cancel the turn if it has not ended; False when it had (done, failed or already cancelled)."""
    with transaction.atomic():
        turn = Turn.objects.select_for_update().filter(pk=turn_id).exclude(status__in=Turn.ENDED).first()
        if turn is None:
            return False
        Turn.objects.filter(pk=turn_id).update(status=Turn.Status.CANCELLED, finished_at=timezone.now(),
                                               error=f"cancelled by {user.get_username()}")  # fmt: skip
        message = f"⏹ Cancelled by {user.get_username()}"
        answer_open_tool_calls(turn_id, message)
        emit(turn_id, TurnEvent.Type.ERROR, phase="cancelled", message=message, reason=FailureReason.CANCELLED,
             detail=message)  # fmt: skip
        emit(turn_id, TurnEvent.Type.DONE, phase="done", status=Turn.Status.CANCELLED)
    return True
