"""Learning from traffic: a good turn teaches its request as an example; a failed or rejected one teaches nothing."""

import pytest

from agents.models import Conversation, RoutingLog, ToolApproval, Turn, TurnEvent
from agents.turns import runtime
from agents.turns.learning import learn_from_turn, tools_that_served
from agents.turns.start import create_turn
from catalog.models import CatalogState, ToolExample
from tests.support.builders import make_policy, make_tool, make_user

pytestmark = pytest.mark.django_db


def learned():
    """The examples learned from turns (the demo catalog brings operators' examples of its own)."""
    return ToolExample.objects.filter(source=ToolExample.Source.LEARNED)


@pytest.fixture
def conversation(counted_embedder, demo_catalog):  # the demo catalog as the bag-of-words stand-in embeds it
    return Conversation.objects.create(owner=make_user())


def run(conversation, text) -> Turn:
    turn = create_turn(conversation, text)
    runtime.run_turn(turn.id)
    turn.refresh_from_db()
    return turn


def test_a_good_turn_teaches_its_request_to_the_tool_that_served_it(conversation):
    turn = run(conversation, "What is 15 + 27?")
    assert turn.status == Turn.Status.DONE
    example = learned().get()
    assert (example.tool.name, example.text, example.source) == ("calculate", "What is 15 + 27?", "learned")
    assert example.turn_id == turn.id and example.conversation_id == conversation.pk
    assert example.owner == conversation.owner
    assert example.approved is False, "pending unless TOOLHUB_LEARN_AUTO_APPROVE"


def test_auto_approve_puts_a_learned_example_in_the_index(conversation, settings):
    settings.TOOLHUB_LEARN_AUTO_APPROVE = True
    version = CatalogState.objects.get().version
    run(conversation, "What is 15 + 27?")
    assert learned().get().approved
    assert CatalogState.objects.get().version > version


def test_a_tool_found_by_tool_search_and_called_is_learned(conversation, scripted_model):
    scripted_model.steps = [
        {"tool_calls": [{"name": "tool_search", "arguments": {"query": "resolve dns records of a hostname"}}]},
        {"tool_calls": [{"name": "dns_lookup", "arguments": {"hostname": "localhost", "record_type": "A"}}]},
        {"content": "localhost resolves to 127.0.0.1."},
    ]
    run(conversation, "Please resolve localhost")
    assert list(learned().values_list("tool__name", "text")) == [("dns_lookup", "Please resolve localhost")]


def test_a_failed_tool_call_teaches_nothing(conversation, scripted_model):
    scripted_model.steps = [
        {"tool_calls": [{"name": "calculate", "arguments": {}}]},  # missing its required expression
        {"content": "I could not compute that."},
    ]
    turn = run(conversation, "What is 15 + 27?")
    assert turn.status == Turn.Status.DONE
    assert TurnEvent.objects.get(turn=turn, type=TurnEvent.Type.TOOL_RESULT).payload["is_error"] is True
    assert learned().count() == 0


def test_a_turn_that_calls_no_tool_teaches_nothing(conversation):
    run(conversation, "What is the capital of France?")
    assert learned().count() == 0


def test_learning_can_be_switched_off(conversation, settings):
    settings.TOOLHUB_LEARN_FROM_TURNS = False
    run(conversation, "What is 15 + 27?")
    assert learned().count() == 0


# --- the rule, on recorded turns ------------------------------------------------


def recorded_turn(*, status=Turn.Status.DONE, recommended=("lookup_thing",), called=("lookup_thing",), ok=True):
    """A finished turn as the runtime records it: routing log and tool result events."""
    make_policy(make_tool("lookup_thing"))
    conversation = Conversation.objects.create(owner=make_user())
    turn = Turn.objects.create(conversation=conversation, status=status)
    RoutingLog.objects.create(
        turn=turn, query="find parcel 123", decision={}, recommended=list(recommended), called=list(called)
    )
    for sequence, name in enumerate(called, start=1):
        TurnEvent.objects.create(
            turn=turn,
            sequence=sequence,
            type=TurnEvent.Type.TOOL_RESULT,
            payload={"tool_name": name, "is_error": not ok, "refused": False, "content": "{}"},
        )
    return turn


def test_a_rejected_turn_teaches_nothing(counted_embedder):
    turn = recorded_turn()
    assert tools_that_served(turn.id) == ["lookup_thing"]
    ToolApproval.objects.create(
        turn=turn, tool_call_id="c1", tool_name="lookup_thing", risk="high", status="denied", expires_at=turn.created_at
    )
    assert tools_that_served(turn.id) == []
    assert learn_from_turn(turn.id) == [] and learned().count() == 0


def test_an_expired_approval_is_a_rejection_too(counted_embedder):
    turn = recorded_turn()
    ToolApproval.objects.create(
        turn=turn, tool_call_id="c1", tool_name="x", risk="high", status="expired", expires_at=turn.created_at
    )
    assert tools_that_served(turn.id) == []


@pytest.mark.parametrize(
    "fields",
    [
        {"status": Turn.Status.FAILED},
        {"status": Turn.Status.WAITING},
        {"ok": False},
        {"recommended": ()},  # called, but neither recommended nor found by search
    ],
)
def test_a_turn_that_did_not_end_well_teaches_nothing(counted_embedder, fields):
    turn = recorded_turn(**fields)
    assert tools_that_served(turn.id) == []
    assert learn_from_turn(turn.id) == []


def test_a_flood_from_one_conversation_stops_at_the_cap(counted_embedder, settings):
    settings.TOOLHUB_LEARN_MAX_PER_CONVERSATION = 1
    first = recorded_turn()
    assert len(learn_from_turn(first.id)) == 1
    second = Turn.objects.create(conversation=first.conversation, status=Turn.Status.DONE)
    RoutingLog.objects.create(
        turn=second, query="another parcel please", decision={}, recommended=["lookup_thing"], called=["lookup_thing"]
    )
    TurnEvent.objects.create(
        turn=second, sequence=1, type=TurnEvent.Type.TOOL_RESULT, payload={"tool_name": "lookup_thing"}
    )
    assert learn_from_turn(second.id) == []
    assert learned().count() == 1
