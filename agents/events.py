"""The one way to emit a turn event: store it (TurnEvent, numbered), then broadcast after commit.

Streams (SSE, console) replay stored events first and then follow the
channel-layer groups `turn.<id>` and `console`, so nothing is missed
whichever side starts first. Never broadcast an event that is not stored.
"""

from functools import partial

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import IntegrityError, transaction
from django.db.models import Max

from .models import TurnEvent

CONSOLE_GROUP = "console"
MESSAGE_TYPE = "turn.event"  # consumers handle it with a turn_event method


def turn_group(turn_id: int) -> str:
    return f"turn.{turn_id}"


def serialize(event: TurnEvent) -> dict:
    return {
        "turn": event.turn_id,
        "sequence": event.sequence,
        "type": event.type,
        "phase": event.phase,
        "payload": event.payload,
        "created_at": event.created_at.isoformat(),
    }


def broadcast(event: TurnEvent) -> None:
    layer = get_channel_layer()
    message = {"type": MESSAGE_TYPE, "event": serialize(event)}
    for group in (turn_group(event.turn_id), CONSOLE_GROUP):
        async_to_sync(layer.group_send)(group, message)


def emit(turn_id: int, type: str, *, phase: str = "", **payload) -> TurnEvent:
    """Store the next event of the turn and send it once the transaction commits."""
    for _attempt in range(5):
        try:
            with transaction.atomic():
                latest = TurnEvent.objects.filter(turn_id=turn_id).aggregate(latest=Max("sequence"))["latest"]
                event = TurnEvent.objects.create(
                    turn_id=turn_id, sequence=(latest or 0) + 1, type=type, phase=phase, payload=payload
                )
        except IntegrityError:
            continue  # another emitter took this sequence number; take the next
        transaction.on_commit(partial(broadcast, event))
        return event
    raise RuntimeError(f"could not number an event of turn {turn_id} after 5 attempts")


def stored_events(turn_id: int, *, after: int = 0) -> list[dict]:
    events = TurnEvent.objects.filter(turn_id=turn_id, sequence__gt=after).order_by("sequence")
    return [serialize(event) for event in events]
