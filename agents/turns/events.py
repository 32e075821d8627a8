"""The one way to emit a turn event: store it (TurnEvent, numbered), then broadcast after commit.

Streams (SSE, console) replay stored events first and then follow the
channel-layer groups `turn.<id>` and `console`, so nothing is missed
whichever side starts first. Never broadcast an event that is not stored.
"""

import asyncio
import logging
import os
import threading
from datetime import datetime
from functools import cache, partial
from typing import Any, TypedDict

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.db import connection, connections, transaction
from django.db.models import QuerySet
from django.utils import timezone

from agents.models import Turn, TurnEvent

log = logging.getLogger(__name__)

CONSOLE_GROUP = "console"
MESSAGE_TYPE = "turn.event"  # consumers handle it with a turn_event method
BROADCAST_TIMEOUT = 10  # seconds a broadcast may wait for the channel layer (Redis) before it is given up


class FailureReason:
    """Why a turn failed: the `reason` of its error event (agents.openai_api.errors gives each its own HTTP error)."""

    MODEL_UNAVAILABLE = "model_unavailable"  # the model server could not be reached or failed
    MODEL_TIMEOUT = "model_timeout"  # the model server did not answer within TOOLHUB_MODEL_TIMEOUT
    CONTEXT_LENGTH_EXCEEDED = "context_length_exceeded"  # the newest turn outgrew the model's budget mid-turn
    TURN_TIMEOUT = "turn_timeout"  # the turn did not finish within TOOLHUB_TURN_TIME_LIMIT
    WORKER_LOST = "worker_lost"  # its worker died after the answer had begun (agents/turns/watchdog.py)
    CANCELLED = "cancelled"  # an operator cancelled it (agents/turns/cancellation.py)
    BROKER_UNAVAILABLE = "broker_unavailable"  # its task could not be queued within TOOLHUB_BROKER_WAIT
    INTERNAL = "internal"


def turn_group(turn_id: int) -> str:
    return f"turn.{turn_id}"


class SerializedEvent(TypedDict):
    """A stored event as streams and the console send it."""

    turn: int
    sequence: int
    type: str
    phase: str
    payload: dict[str, Any]  # the event's JSON payload
    created_at: str


def serialize(event: TurnEvent) -> SerializedEvent:
    return {
        "turn": event.turn_id,
        "sequence": event.sequence,
        "type": event.type,
        "phase": event.phase,
        "payload": event.payload,
        "created_at": event.created_at.isoformat(),
    }


def broadcast(event: TurnEvent) -> None:
    """Send the stored event to its turn's group and the console group, in order, and wait until sent.

    The in-memory layer (embedded default) lives on the loop that runs the
    consumers, so it is reached through async_to_sync from the turn's thread
    (started by sync_to_async from that loop). A network layer (Redis) is
    reached through one long-lived loop per process: async_to_sync from a
    thread without a loop (a Celery worker) would start a thread and a loop
    for every call, and the Redis layer a connection for every loop.
    """
    layer = get_channel_layer()
    message = {"type": MESSAGE_TYPE, "event": serialize(event)}

    async def send() -> None:
        for group in (turn_group(event.turn_id), CONSOLE_GROUP):
            await layer.group_send(group, message)

    # Best effort: the event is stored, and streams read the store whenever the layer is quiet, so a Redis
    # fault (a restart) delays what they see by a second; it never fails the turn.
    try:
        if isinstance(layer, InMemoryChannelLayer):
            async_to_sync(send)()
        else:
            future = asyncio.run_coroutine_threadsafe(send(), _sender_loop())
            try:
                future.result(timeout=BROADCAST_TIMEOUT)
            except TimeoutError:
                future.cancel()
                raise
    except Exception as error:
        log.warning("event %s of turn %s stored, not broadcast: %r", event.sequence, event.turn_id, error)


_sender: tuple[int, asyncio.AbstractEventLoop] | None = None
_sender_lock = threading.Lock()


def _sender_loop() -> asyncio.AbstractEventLoop:
    """This process's broadcast loop, in a daemon thread; a forked child (a prefork worker) starts its own."""
    global _sender
    with _sender_lock:
        if _sender is None or _sender[0] != os.getpid():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="toolhub-broadcast", daemon=True).start()
            _sender = (os.getpid(), loop)
        return _sender[1]


class TurnTakenOver(Exception):
    """The run emitting is no longer the turn's: the watchdog failed or restarted the turn
    (agents/turns/watchdog.py)."""


def emit(turn_id: int, type: str, *, phase: str = "", attempt: int | None = None, after: int | None = None,
         **payload: object) -> TurnEvent:  # fmt: skip
    """Store the next event of the turn and send it once the transaction commits.

    `attempt`: the run emitting (Turn.attempt); the event is refused (TurnTakenOver) unless that run still holds
    the running turn, so a run the watchdog gave up on never adds to the turn's events.
    `after`: the turn's last event number as the caller knows it (the run that stored it): the event takes the next
    one without reading the latest; when another emitter took that number first, the latest is read and the next
    taken, as without it.

    One statement (`_insert_event`): the hold is checked and the row inserted together, so an event outside a
    transaction is one round trip to the database (it was four: BEGIN, the hold, the insert, COMMIT), and one inside
    the caller's transaction needs no savepoint, since a number taken first is skipped, not an error.
    """
    created_at = timezone.now()
    for _attempt in range(5):
        inserted = _insert_event(turn_id, type, phase, payload, created_at, attempt, after)
        if inserted is None:
            if attempt is not None and not held_turn(turn_id, attempt).exists():
                raise TurnTakenOver(f"turn {turn_id} is no longer run by attempt {attempt}")
            after = None  # another emitter took this sequence number; read the latest and take the next
            continue
        event_id, sequence = inserted
        event = TurnEvent.from_db(connection.alias, _EVENT_FIELDS, [event_id, turn_id, sequence, type, phase, payload,
                                                                     created_at])  # fmt: skip
        transaction.on_commit(partial(broadcast, event))
        return event
    raise RuntimeError(f"could not number an event of turn {turn_id} after 5 attempts")


def held_turn(turn_id: int, attempt: int) -> QuerySet[Turn]:
    """The turn's row while the run `attempt` holds it (running, not taken over)."""
    return Turn.objects.filter(pk=turn_id, attempt=attempt, status=Turn.Status.RUNNING)


# Every concrete field of TurnEvent, in its order (Model.from_db takes the values so): what an emit stored.
_EVENT_FIELDS = ["id", "turn_id", "sequence", "type", "phase", "payload", "created_at"]


def _insert_event(turn_id: int, type: str, phase: str, payload: dict[str, object], created_at: datetime,
                  attempt: int | None, after: int | None) -> tuple[int, int] | None:  # fmt: skip
    """(id, sequence) of the event inserted, or None when the run no longer holds the turn or the number was taken.
    The hold is the turn's row locked (FOR UPDATE where the database has it) and matched in the same statement, so
    the watchdog cannot take the turn between the check and the insert."""
    fields = TurnEvent._meta
    params: list[Any] = [turn_id, after + 1 if after is not None else turn_id, type, phase,
                         fields.get_field("payload").get_db_prep_save(payload, connection),
                         fields.get_field("created_at").get_db_prep_save(created_at, connection)]  # fmt: skip
    if attempt is not None:
        params += [turn_id, attempt, Turn.Status.RUNNING.value]
    with connection.cursor() as cursor:
        cursor.execute(_insert_sql(connection.alias, numbered=after is not None, held=attempt is not None), params)
        row = cursor.fetchone()
    return (row[0], row[1]) if row else None


@cache
def _insert_sql(alias: str, *, numbered: bool, held: bool) -> str:
    """_insert_event's statement on database `alias`: the number given (`numbered`) or the next after the latest
    stored, the run's hold on the turn checked (`held`) or not. Worked out once."""
    connection = connections[alias]
    quote = connection.ops.quote_name
    column = {field.name: quote(str(field.column)) for field in TurnEvent._meta.concrete_fields}  # each has one
    table, turn, sequence = quote(TurnEvent._meta.db_table), column["turn"], column["sequence"]
    columns = ", ".join(column[name] for name in ("turn", "sequence", "type", "phase", "payload", "created_at"))
    number = "%s" if numbered else f"(SELECT COALESCE(MAX({sequence}), 0) + 1 FROM {table} WHERE {turn} = %s)"
    condition = "1 = 1"  # a WHERE in any case: SQLite reads an ON CONFLICT after a SELECT without one as a join's
    if held:
        lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
        condition = (f"EXISTS (SELECT 1 FROM {quote(Turn._meta.db_table)} WHERE {quote('id')} = %s "
                     f"AND {quote('attempt')} = %s AND {quote('status')} = %s{lock})")  # fmt: skip
    return (f"INSERT INTO {table} ({columns}) SELECT %s, {number}, %s, %s, %s, %s WHERE {condition} "
            f"ON CONFLICT ({turn}, {sequence}) DO NOTHING RETURNING {quote('id')}, {sequence}")  # fmt: skip


def stored_events(turn_id: int, *, after: int = 0, up_to: int | None = None) -> list[SerializedEvent]:
    events = TurnEvent.objects.filter(turn_id=turn_id, sequence__gt=after).order_by("sequence")
    if up_to is not None:
        events = events.filter(sequence__lte=up_to)
    return [serialize(event) for event in events]
