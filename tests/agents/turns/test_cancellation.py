"""An operator cancels a turn: it ends as cancelled with an event saying so, and its run stops at the next step."""

import pytest

from agents.models import Conversation, Message, Turn, TurnEvent
from agents.openai_api.errors import failure_error
from agents.providers import ModelChunk, ToolCall
from agents.turns import runtime
from agents.turns.cancellation import cancel_turn
from agents.turns.memory import validate_transcript
from agents.turns.start import create_turn
from tests.support.builders import make_user

pytestmark = pytest.mark.django_db


def kinds(turn) -> list[tuple[str, str]]:
    return list(TurnEvent.objects.filter(turn=turn).order_by("sequence").values_list("type", "phase"))


class CancelledMidAnswer:
    """A model that streams a first piece, is cancelled by an operator while it streams, then would go on: more
    content and a tool call the cancelled turn must not run."""

    name = label = "cancelled-mid-answer"

    def __init__(self, operator):
        self.operator = operator
        self.after_cancel = []

    def stream(self, messages, tools, *, hints, **options):
        yield ModelChunk(content="The sum is")
        turn_id = Message.objects.filter(role=Message.Role.USER).latest("id").turn_id
        assert cancel_turn(turn_id=turn_id, user=self.operator)
        self.after_cancel.append("streaming on")
        yield ModelChunk(content=" 42.")
        yield ModelChunk(tool_calls=(ToolCall("c1", "calculate", '{"expression": "15 + 27"}'),))


def test_a_cancelled_run_stops_at_the_next_step_and_the_turn_ends_cancelled(demo_catalog, monkeypatch):
    operator = make_user("operator", role="operator")
    conversation = Conversation.objects.create(owner=make_user("owner"))
    model = CancelledMidAnswer(operator)
    monkeypatch.setattr(runtime, "get_provider", lambda upstream: model)
    called = []
    monkeypatch.setattr(runtime, "execute", lambda call, *args, **kwargs: called.append(call.name))
    turn = create_turn(conversation, "What is 15 + 27?")

    runtime.run_turn(turn.id)  # returns: the run stopped quietly, it did not fail the turn

    turn.refresh_from_db()
    assert turn.status == Turn.Status.CANCELLED and turn.error == "cancelled by operator"
    events = kinds(turn)
    assert events[-2:] == [("error", "cancelled"), ("done", "done")]
    assert events.count(("delta", "content")) == 1  # the piece before the cancel; nothing streamed after it
    assert called == [] and ("tool_call", "tool") not in events
    error, done = TurnEvent.objects.filter(turn=turn).order_by("-sequence")[:2][::-1]
    assert error.payload["message"] == "⏹ Cancelled by operator" and error.payload["reason"] == "cancelled"
    assert done.payload["status"] == "cancelled"
    # Nothing but the user's message was stored before the cancel, and nothing after it.
    assert list(turn.messages.values_list("role", flat=True)) == ["user"]
    runtime.run_turn(turn.id)  # a redelivered task finds it ended
    assert kinds(turn) == events


def test_what_ran_before_the_cancel_stays_and_a_call_left_open_is_answered():
    """A transfer that ran before the cancel must stay known to the next turn; a call cut off gets a result."""
    conversation = Conversation.objects.create(owner=make_user("owner"))
    turn = create_turn(conversation, "move 100 points from M-1 to M-2, then tell me both balances")
    ran = {"id": "c1", "type": "function", "function": {"name": "transfer_points", "arguments": "{}"}}
    cut = {"id": "c2", "type": "function", "function": {"name": "get_member_balance", "arguments": "{}"}}
    for calls, result in (([ran], "transferred"), ([cut], None)):
        Message.objects.create(conversation=conversation, turn=turn, role=Message.Role.ASSISTANT, tool_calls=calls)
        if result:
            Message.objects.create(conversation=conversation, turn=turn, role=Message.Role.TOOL,
                                   tool_call_id=calls[0]["id"], content=result)  # fmt: skip

    assert cancel_turn(turn_id=turn.id, user=make_user("operator", role="operator"))

    history = [runtime.as_message(m) for m in conversation.messages.order_by("id")]
    validate_transcript(history)
    tools = [(m["tool_call_id"], m["content"]) for m in history if m["role"] == "tool"]
    assert tools[0] == ("c1", "transferred")
    assert (
        tools[1][0] == "c2"
        and "may or may not have taken effect" in tools[1][1]
        and "Cancelled by operator" in tools[1][1]
    )


def test_an_ended_turn_is_not_cancelled_again():
    conversation = Conversation.objects.create(owner=make_user("owner"))
    turn = create_turn(conversation, "hello")
    operator = make_user("operator", role="operator")
    assert cancel_turn(turn_id=turn.id, user=operator)
    assert not cancel_turn(turn_id=turn.id, user=operator)
    Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.DONE)
    assert not cancel_turn(turn_id=turn.id, user=operator)
    assert kinds(turn) == [("error", "cancelled"), ("done", "done")]


def test_the_api_answers_a_cancelled_turn_with_an_error_not_a_partial_answer():
    error = failure_error({"reason": "cancelled"})
    assert (error.status, error.code) == (409, "turn_cancelled")


def test_the_console_shows_cancel_on_an_unfinished_turn_and_an_operator_cancels_it(client):
    owner = make_user("owner", role="operator")
    conversation = Conversation.objects.create(owner=owner)
    turn = create_turn(conversation, "What is 15 + 27?")
    client.force_login(make_user("watcher", role="viewer"))
    assert "Cancel turn" not in client.get(f"/console/{conversation.pk}/").content.decode()
    assert client.post(f"/console/turns/{turn.id}/cancel").status_code == 403
    client.force_login(make_user("operator", role="operator"))
    page = client.get(f"/console/{conversation.pk}/").content.decode()
    assert f'hx-post="/console/turns/{turn.id}/cancel"' in page and f"Cancel turn {turn.id}</button>" in page
    response = client.post(f"/console/turns/{turn.id}/cancel", headers={"HX-Request": "true"})
    assert response.status_code == 204
    turn.refresh_from_db()
    assert turn.status == Turn.Status.CANCELLED
    page = client.get(f"/console/{conversation.pk}/").content.decode()
    assert "Cancel turn" not in page and "status-cancelled" in page and "⏹ Cancelled by operator" in page
    again = client.post(f"/console/turns/{turn.id}/cancel")
    assert again.status_code == 409 and "already ended (cancelled)" in again.content.decode()
