"""Client tools are checked as OpenAI checks them: schemas, unique names, a cap, tool_choice, tool messages."""

import pytest

from agents.turns.client_tools import (
    ClientToolError,
    ClientTools,
    check_name_conflicts,
    check_transcript,
    parse_client_tools,
)


def function(name, parameters=None, **extra):
    body = {"name": name, "description": f"{name} for tests", **extra}
    if parameters is not None:
        body["parameters"] = parameters
    return {"type": "function", "function": body}


WEATHER = {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}


def parse(tools=None, tool_choice=None, parallel=None, max_tools=128) -> ClientTools:
    return parse_client_tools(tools, tool_choice, parallel, max_tools=max_tools)


def refusal(**kwargs) -> ClientToolError:
    with pytest.raises(ClientToolError) as raised:
        parse(**kwargs)
    return raised.value


def test_tools_are_normalised_and_a_missing_schema_takes_no_parameters():
    client = parse([function("get_weather", WEATHER), function("ping")], "auto", False)
    assert client.names == ("get_weather", "ping")
    assert client.definitions[1]["function"]["parameters"] == {"type": "object", "properties": {}}
    assert client.tool_choice == "auto" and client.parallel_tool_calls is False


def test_no_tools_is_an_empty_set():
    assert parse() == ClientTools()


@pytest.mark.parametrize(
    "parameters,words",
    [
        ({"type": "object", "properties": {"n": {"type": "integr"}}}, "not a valid JSON schema"),
        ({"type": "array"}, '"type": "object"'),
        ({"type": "object", "properties": {}, "required": ["city"]}, "not defined in properties"),
        ("a string", "not a valid JSON schema"),
    ],
)
def test_an_invalid_parameter_schema_is_refused_with_its_reason(parameters, words):
    error = refusal(tools=[function("get_weather", parameters)])
    assert error.code == "invalid_tool_schema" and error.param == "tools[0].function.parameters"
    assert words in error.message and "'get_weather'" in error.message


def test_duplicate_names_are_refused():
    error = refusal(tools=[function("ping"), function("pong"), function("ping")])
    assert error.code == "duplicate_tool_name" and error.param == "tools[2].function.name"
    assert "'ping' is used twice" in error.message


def test_more_tools_than_the_cap_are_refused_and_the_cap_itself_is_allowed():
    assert len(parse([function(f"t{i}") for i in range(128)]).names) == 128
    error = refusal(tools=[function(f"t{i}") for i in range(1000)])
    assert error.code == "too_many_tools" and "1000 tools; at most 128" in error.message


@pytest.mark.parametrize(
    "tool,param",
    [
        ({"type": "code_interpreter"}, "tools[0].type"),
        ({"type": "function", "function": "ping"}, "tools[0].function"),
        (function("has space"), "tools[0].function.name"),
        (function("x" * 65), "tools[0].function.name"),
    ],
)
def test_malformed_tools_name_what_is_wrong(tool, param):
    assert refusal(tools=[tool]).param == param


def test_tool_choice_naming_an_absent_tool_is_refused():
    error = refusal(tools=[function("ping")], tool_choice={"type": "function", "function": {"name": "pong"}})
    assert error.code == "tool_not_found" and error.param == "tool_choice"
    assert "'pong'" in error.message and "(ping)" in error.message


@pytest.mark.parametrize("choice", ["always", {"type": "function"}, {"function": {"name": "ping"}}, 3])
def test_an_unknown_tool_choice_is_refused(choice):
    assert refusal(tools=[function("ping")], tool_choice=choice).param == "tool_choice"


def test_required_without_tools_is_refused():
    assert "needs at least one tool" in refusal(tool_choice="required").message


def test_parallel_tool_calls_must_be_a_boolean():
    assert refusal(tools=[function("ping")], parallel="yes").param == "parallel_tool_calls"


def test_the_tool_choice_applies_to_the_first_step_only_but_none_to_every_step():
    named = parse([function("ping")], {"type": "function", "function": {"name": "ping"}}, True)
    assert named.forced_name == "ping"
    assert named.step_options(0) == {"tool_choice": named.tool_choice, "parallel_tool_calls": True}
    assert named.step_options(1) == {"parallel_tool_calls": True}
    assert parse([function("ping")], "none").step_options(3) == {"tool_choice": "none"}
    assert parse([function("ping")]).step_options(0) == {}


def test_a_client_tool_named_like_a_toolhub_tool_is_refused():
    client = parse([function("ping"), function("calculate")])
    with pytest.raises(ClientToolError) as raised:
        check_name_conflicts(client, {"calculate", "tool_search"})
    assert raised.value.code == "tool_name_conflict" and raised.value.param == "tools[1].function.name"
    check_name_conflicts(parse([function("ping")]), {"calculate"})  # no clash, no error


def call(call_id, name="get_weather", arguments='{"location": "Paris"}'):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def transcript(*tail):
    return [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "weather in Paris and Rome?"},
        {"role": "assistant", "content": "", "tool_calls": [call("call_a"), call("call_b")]},
        *tail,
    ]


def test_tool_results_answering_the_calls_are_accepted():
    check_transcript(transcript({"role": "tool", "tool_call_id": "call_a", "content": "sunny"},
                                {"role": "tool", "tool_call_id": "call_b", "content": "rain"}))  # fmt: skip


def test_a_tool_message_with_an_unknown_tool_call_id_is_refused_with_its_index():
    with pytest.raises(ClientToolError) as raised:
        check_transcript(transcript({"role": "tool", "tool_call_id": "call_a", "content": "sunny"},
                                    {"role": "tool", "tool_call_id": "call_zzz", "content": "rain"}))  # fmt: skip
    assert raised.value.code == "invalid_tool_messages"
    assert raised.value.message.startswith("messages[4]: tool result 'call_zzz' answers no open tool call")


def test_an_unanswered_call_or_a_tool_message_without_an_id_is_refused():
    with pytest.raises(ClientToolError, match="'call_b' have no result"):
        check_transcript(transcript({"role": "tool", "tool_call_id": "call_a", "content": "sunny"}))
    with pytest.raises(ClientToolError, match="needs the tool_call_id"):
        check_transcript(transcript({"role": "tool", "tool_call_id": "", "content": "sunny"}))


def test_a_malformed_tool_call_is_refused():
    messages = transcript()
    messages[2]["tool_calls"] = [{"id": "call_a", "function": {"arguments": "{}"}}]
    with pytest.raises(ClientToolError, match="each call needs an id, and a function with a name"):
        check_transcript(messages)
