"""A turn whose worker died is taken over once, never runs a write twice, and every turn ends by its deadline."""

import json
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connections
from django.utils import timezone

from agents import liveness, runtime
from agents.api import sse_frame, turn_events
from agents.events import emit
from agents.models import Conversation, Message, Turn, TurnEvent
from agents.tool_calls import with_idempotency_key
from agents.turns import create_turn
from catalog.demo_catalog import load_demo_catalog
from tests.builders import make_policy, make_tool, make_user


@pytest.fixture
def conversation(db):
    load_demo_catalog()
    return Conversation.objects.create(owner=make_user())


def types(turn) -> list[str]:
    return list(TurnEvent.objects.filter(turn=turn).order_by("sequence").values_list("type", flat=True))


def died_while_calling(conversation, text: str, name: str, arguments: dict) -> Turn:
    """What a run that died inside a tool call leaves: the step's message, its tool_call event, a stale heart."""
    turn = create_turn(conversation, text)
    asked = Message.objects.create(conversation=conversation, turn=turn, role=Message.Role.ASSISTANT, content="",
                                   tool_calls=[{"id": "call_0", "type": "function", "function": {
                                       "name": name, "arguments": json.dumps(arguments)}}])  # fmt: skip
    emit(turn.id, TurnEvent.Type.TOOL_CALL, phase="tool", tool_name=name, arguments=arguments,
         call_key=runtime.call_key(turn.id, asked.pk, "call_0"))  # fmt: skip
    stale = timezone.now() - timedelta(seconds=settings.TOOLHUB_TURN_STALL + 1)
    Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.RUNNING, attempt=1, heartbeat_at=stale)
    return turn


def test_a_write_the_dead_run_started_is_not_run_again_and_the_turn_fails_saying_so(conversation):
    tool = make_tool("open_ticket", input_schema={"type": "object", "properties": {"title": {"type": "string"}}})
    make_policy(tool, operation="create", domains=("support",))
    turn = died_while_calling(conversation, "open a ticket titled printer", "open_ticket", {"title": "printer"})
    runtime.run_turn(turn.id)
    turn.refresh_from_db()
    assert turn.status == Turn.Status.FAILED
    assert "open_ticket ran: it may have run, and toolhub does not run a write twice" in turn.error
    assert types(turn).count(TurnEvent.Type.TOOL_CALL) == 1  # not called again
    assert types(turn)[-2:] == [TurnEvent.Type.ERROR, TurnEvent.Type.DONE]


def test_a_read_the_dead_run_started_runs_again_and_the_turn_finishes_once(conversation):
    turn = died_while_calling(conversation, "What is 15 + 27?", "calculate", {"expression": "15 + 27"})
    runtime.run_turn(turn.id)
    turn.refresh_from_db()
    assert turn.status == Turn.Status.DONE
    assert "42" in Message.objects.get(turn=turn, role=Message.Role.TOOL).content  # run once, in the new run
    assert types(turn).count(TurnEvent.Type.DONE) == 1


def test_a_write_that_takes_an_idempotency_key_gets_the_same_key_in_every_run():
    definition = {"function": {"parameters": {"properties": {"idempotency_key": {"type": "string"}}}}}
    assert with_idempotency_key({"a": 1}, definition, "k-1") == {"a": 1, "idempotency_key": "k-1"}
    assert with_idempotency_key({"a": 1}, {"function": {"parameters": {}}}, "k-1") == {"a": 1}
    assert runtime.call_key(7, 3, "call_0") == runtime.call_key(7, 3, "call_0") != runtime.call_key(7, 4, "call_0")


def test_the_watchdog_fails_an_overdue_turn_once_and_visibly(conversation):
    turn = create_turn(conversation, "What is 15 + 27?")
    Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.RUNNING, deadline_at=timezone.now() - timedelta(hours=1))
    assert liveness.watch_turns()["failed"] == 1
    assert liveness.watch_turns()["failed"] == 0
    turn.refresh_from_db()
    assert turn.status == Turn.Status.FAILED
    error = TurnEvent.objects.get(turn=turn, type=TurnEvent.Type.ERROR)
    assert error.payload["code"] == liveness.TIMEOUT_CODE
    assert types(turn) == [TurnEvent.Type.ERROR, TurnEvent.Type.DONE]


def test_the_watchdog_sends_a_stalled_turn_to_a_worker_which_takes_it_over(conversation, eager_celery):
    turn = create_turn(conversation, "What is 15 + 27?")
    stale = timezone.now() - timedelta(seconds=settings.TOOLHUB_TURN_STALL + 1)
    Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.RUNNING, attempt=1, heartbeat_at=stale)
    assert liveness.watch_turns()["taken_over"] == 1
    turn.refresh_from_db()
    assert (turn.status, turn.attempt) == (Turn.Status.DONE, 2)


def test_nothing_is_stored_after_a_turns_done(conversation):
    turn = create_turn(conversation, "What is 15 + 27?")
    liveness.fail_turn(turn.id, "stopped")
    assert emit(turn.id, TurnEvent.Type.DELTA, phase="content", content="late") is None
    assert types(turn) == [TurnEvent.Type.ERROR, TurnEvent.Type.DONE]


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_stream_whose_turn_no_worker_runs_ends_at_the_deadline_with_an_error_frame():
    @sync_to_async
    def overdue_turn():
        conversation = Conversation.objects.create(owner=make_user(username="late"))
        turn = create_turn(conversation, "What is 15 + 27?")
        Turn.objects.filter(pk=turn.pk).update(deadline_at=timezone.now() - timedelta(seconds=60))
        return turn

    turn = await overdue_turn()

    async def nobody_runs_it():
        return None

    events = [event async for event in turn_events(turn.id, start=nobody_runs_it)]
    frames = [sse_frame(event, "chatcmpl-x", "toolhub") for event in events]
    assert [e["type"] for e in events] == [TurnEvent.Type.ERROR, TurnEvent.Type.DONE]
    assert frames[0]["error"]["code"] == liveness.TIMEOUT_CODE and frames[1] is None
    await sync_to_async(connections.close_all)()
