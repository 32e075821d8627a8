"""An operator cancels an unfinished turn: it ends as cancelled, and whatever still runs it stops.

The turn ends as a failed one does (lifecycle.end_turn), in one transaction: its status, a pending approval closed
(expired, so no decision reaches an ended turn), its open tool calls answered, its error and done events. The run
that held it stops at its next step boundary: it may not store an event or a message once the turn is no longer
running (agents.turns.events.emit, TurnRun.save_message), so a streaming model call ends at its next chunk and a pending
tool call never starts. What it stored stays, so the next turn's model knows what ran before the cancel. Never runs
a turn.
"""

from agents.models import Turn

from .approvals import PERMISSION as APPROVAL_PERMISSION
from .events import FailureReason
from .lifecycle import end_turn

# Cancelling a turn is an operator's intervention on a running turn, as deciding its approvals is.
PERMISSION = APPROVAL_PERMISSION


def cancel_turn(*, turn_id: int, user) -> bool:
    """Cancel the turn if it has not ended; False when it had (done, failed or already cancelled)."""
    name = user.get_username()
    return end_turn(turn_id, Turn.Status.CANCELLED, FailureReason.CANCELLED, f"⏹ Cancelled by {name}",
                    detail=f"cancelled by {name}", phase="cancelled")  # fmt: skip
