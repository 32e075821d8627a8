"""A turn with an API client's own tools: offered and counted, handed back to the client, never run by toolhub."""

import json

import pytest
from django.contrib.auth.models import User

from agents.console.fragments import event_item
from agents.models import Message, Turn, TurnEvent
from agents.openai_api.views import open_turn, parse_request
from agents.providers import TurnHints
from agents.providers.builtin.model import BuiltinProvider, client_arguments
from agents.turns import runtime
from tests.support.builders import make_user

pytestmark = pytest.mark.django_db

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city",
        "parameters": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]},
    },
}
NAMED = {"type": "function", "function": {"name": "get_weather"}}


def run_request(body: dict) -> Turn:
    """What the API does with a request body: parse, store, run (eagerly, here)."""
    owner = User.objects.filter(username="client-tools").first() or make_user("client-tools")
    turn = open_turn(owner, parse_request(json.dumps(body).encode()))
    runtime.run_turn(turn.id)
    turn.refresh_from_db()
    return turn


def ask(text: str, **fields) -> dict:
    return {"messages": [{"role": "user", "content": text}], "tools": [WEATHER], **fields}


def events(turn, type=None):
    rows = TurnEvent.objects.filter(turn=turn).order_by("sequence")
    return [e for e in rows if type is None or e.type == type]


def done(turn) -> dict:
    (event,) = events(turn, TurnEvent.Type.DONE)
    return event.payload


def offered(request: dict) -> list[str]:
    return [tool["function"]["name"] for tool in request.get("tools", [])]


def test_a_client_tool_call_ends_the_turn_with_tool_calls_and_is_not_run(demo_catalog, scripted_model):
    scripted_model.steps = [{"tool_calls": [{"name": "get_weather", "arguments": {"location": "Paris"}}]}]
    turn = run_request(ask("What's the weather in Paris?", tool_choice=NAMED, parallel_tool_calls=False))
    assert turn.status == Turn.Status.DONE
    payload = done(turn)
    assert payload["finish_reason"] == "tool_calls"
    function = {"name": "get_weather", "arguments": '{"location": "Paris"}'}
    assert payload["tool_calls"] == [{"id": "call_0", "type": "function", "function": function}]
    (request,) = scripted_model.requests
    assert offered(request)[-1] == "get_weather"
    assert request["tool_choice"] == NAMED and request["parallel_tool_calls"] is False
    (call,) = events(turn, TurnEvent.Type.TOOL_CALL)
    assert call.payload == {"tool_name": "get_weather", "arguments": {"location": "Paris"}, "client": True}
    assert not events(turn, TurnEvent.Type.TOOL_RESULT) and not Message.objects.filter(role="tool").exists()
    assert "client tool: handed to the API client" in event_item(_serial(call))["text"]


def _serial(event) -> dict:
    return {"type": event.type, "payload": event.payload, "phase": event.phase, "sequence": event.sequence,
            "turn": event.turn_id}  # fmt: skip


def test_client_tools_join_the_bundle_and_count_in_the_budget(demo_catalog, scripted_model):
    scripted_model.steps = [{"content": "It is sunny."}]
    turn = run_request(ask("What's the weather in Paris?"))
    routing = next(e for e in events(turn, TurnEvent.Type.ROUTING) if e.phase == "routing")
    budget = next(e for e in events(turn, TurnEvent.Type.ROUTING) if e.phase == "budget")
    assert routing.payload["client_tools"] == ["get_weather"] and routing.payload["client_schema_tokens"] > 20
    assert budget.payload["tools"] >= routing.payload["loaded_schema_tokens"] + routing.payload["client_schema_tokens"]
    assert "1 client tools" in event_item(_serial(routing))["text"]
    assert done(turn)["finish_reason"] == "stop" and "tool_calls" not in done(turn)


def test_toolhub_tools_still_run_in_the_same_step_and_the_choice_applies_to_the_first_step(
    demo_catalog, scripted_model
):
    scripted_model.steps = [
        {"tool_calls": [{"name": "calculate", "arguments": {"expression": "15 + 27"}}]},
        {"tool_calls": [{"name": "calculate", "arguments": {"expression": "2 * 21"}},
                        {"name": "get_weather", "arguments": {"location": "Paris"}}]},
    ]  # fmt: skip
    turn = run_request(ask("What is 15 + 27, and the weather in Paris?", tool_choice="required"))
    first, second = scripted_model.requests
    assert first["tool_choice"] == "required" and "tool_choice" not in second
    assert [e.payload["tool_name"] for e in events(turn, TurnEvent.Type.TOOL_RESULT)] == ["calculate", "calculate"]
    results = list(Message.objects.filter(turn=turn, role="tool").values_list("content", flat=True))
    assert all("42" in result for result in results)
    assert [call["function"]["name"] for call in done(turn)["tool_calls"]] == ["get_weather"]


def test_the_clients_tool_results_continue_the_conversation(demo_catalog, scripted_model):
    call = {
        "id": "call_7",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"location": "Paris"}'},
    }
    scripted_model.steps = [{"content": "Paris: 21 °C and sunny."}]
    turn = run_request({"tools": [WEATHER], "messages": [
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_7", "content": '{"temperature_c": 21, "sky": "sunny"}'},
    ]})  # fmt: skip
    (request,) = scripted_model.requests
    assert [m["role"] for m in request["messages"]] == ["system", "user", "assistant", "tool"]
    assert request["messages"][2]["tool_calls"] == [call]
    assert request["messages"][3] == {"role": "tool", "tool_call_id": "call_7",
                                      "content": '{"temperature_c": 21, "sky": "sunny"}'}  # fmt: skip
    assert done(turn)["finish_reason"] == "stop" and done(turn)["content"] == "Paris: 21 °C and sunny."


@pytest.mark.parametrize("behaviour,reason", [("error", "model_unavailable"), ("slow", "model_timeout")])
def test_a_failed_model_names_its_reason(demo_catalog, scripted_model, settings, behaviour, reason):
    settings.TOOLHUB_MODEL_TIMEOUT = 1
    scripted_model.behaviour, scripted_model.delay = behaviour, 3
    turn = run_request(ask("hello"))
    assert turn.status == Turn.Status.FAILED
    (error,) = events(turn, TurnEvent.Type.ERROR)
    assert error.payload["reason"] == reason and error.payload["message"].startswith("The turn failed:")


# --- the builtin offline model ---------------------------------------------------------------------------


def builtin_step(text: str, tools: list[dict], **choices) -> list:
    hints = TurnHints(user_text=text, client_tools=tuple(t["function"]["name"] for t in tools))
    return list(BuiltinProvider().stream([{"role": "user", "content": text}], tools, hints=hints, **choices))


def test_the_builtin_model_calls_a_named_or_required_client_tool_with_what_the_request_says():
    for choice in (NAMED, "required"):
        (chunk,) = builtin_step("What's the weather in Paris?", [WEATHER], tool_choice=choice)
        (call,) = chunk.tool_calls
        assert (call.name, json.loads(call.arguments), chunk.finish_reason) == (
            "get_weather", {"location": "Paris"}, "tool_calls")  # fmt: skip


def test_the_builtin_model_asks_for_a_missing_value_instead_of_inventing_it():
    chunks = builtin_step("What's the weather like?", [WEATHER], tool_choice=NAMED)
    assert not any(chunk.tool_calls for chunk in chunks)
    assert "".join(c.content for c in chunks) == "To call get_weather I need location: what is the location?"


def test_the_builtin_model_leaves_client_tools_alone_on_auto_and_none():
    for choice in (None, "auto", "none"):
        assert not any(chunk.tool_calls for chunk in builtin_step("What's the weather in Paris?", [WEATHER],
                                                                  tool_choice=choice))  # fmt: skip


def test_the_builtin_model_reads_numbers_enums_and_dates_by_schema_never_guessing():
    parameters = {"type": "object", "required": ["count", "unit", "day", "note"], "properties": {
        "count": {"type": "integer"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "day": {"type": "string", "format": "date"}, "note": {"type": "string"}}}  # fmt: skip
    arguments, missing = client_arguments(parameters, "3 readings in Celsius on 2026-12-24")
    assert arguments == {"count": 3, "unit": "celsius", "day": "2026-12-24"} and missing == ["note"]
    assert client_arguments(parameters, "readings")[1] == ["count", "unit", "day", "note"]


def test_with_the_builtin_model_the_whole_round_trip_answers_from_the_clients_result(demo_catalog):
    first = run_request(ask("What's the weather in Paris?", tool_choice=NAMED))
    (call,) = done(first)["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"location": "Paris"}
    second = run_request({"tools": [WEATHER], "tool_choice": NAMED, "messages": [
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": "21 °C and sunny"},
    ]})  # fmt: skip
    assert done(second)["finish_reason"] == "stop" and "21 °C and sunny" in done(second)["content"]


def test_a_risky_toolhub_call_beside_a_client_call_is_refused_not_left_waiting(demo_catalog, scripted_model):
    from agents.models import ToolApproval

    scripted_model.steps = [{"tool_calls": [{"name": "restart_container", "arguments": {"container": "web"}},
                                            {"name": "get_weather", "arguments": {"location": "Paris"}}]}]  # fmt: skip
    turn = run_request(ask("docker restart web"))
    assert turn.status == Turn.Status.DONE and not ToolApproval.objects.exists()
    (refused,) = Message.objects.filter(turn=turn, role="tool").values_list("content", flat=True)
    assert "restart_container needs an operator's approval" in refused
    assert [call["function"]["name"] for call in done(turn)["tool_calls"]] == ["get_weather"]


@pytest.mark.usefixtures("eager_celery")
def test_a_turn_resumed_after_an_approval_does_not_force_the_tool_choice_again(
    demo_catalog, scripted_model, django_capture_on_commit_callbacks
):
    from agents.models import ToolApproval
    from agents.turns.approvals import decide_approval

    scripted_model.steps = [{"tool_calls": [{"name": "restart_container", "arguments": {"container": "web"}}]},
                            {"content": "Restarted."}]  # fmt: skip
    turn = run_request(ask("docker restart web", tool_choice="required"))
    assert turn.status == Turn.Status.WAITING
    with django_capture_on_commit_callbacks(execute=True):
        decide_approval(approval_id=ToolApproval.objects.get().pk, user=make_user("op"), approve=True)
    first, resumed = scripted_model.requests
    assert first["tool_choice"] == "required" and "tool_choice" not in resumed
    turn.refresh_from_db()
    assert turn.status == Turn.Status.DONE and done(turn)["finish_reason"] == "stop"
