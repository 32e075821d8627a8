"""The OpenAI-compatible API refuses bad input with OpenAI-style errors and stores nothing half-way."""

import json
import re

import pytest
from django.core.management import call_command

from agents.access.api_keys import authenticate, create_api_key
from agents.models import ApiKey, Conversation, Message, ModelProfile, Turn
from tests.support.builders import make_user

pytestmark = pytest.mark.django_db
URL = "/v1/chat/completions"


@pytest.fixture
def key():
    return create_api_key(user=make_user(), name="test")[1]


def post(client, body, key=None, **extra):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    return client.post(URL, data=data, content_type="application/json", headers=headers, **extra)


def error_of(response) -> dict:
    return response.json()["error"]


def test_no_key_or_a_wrong_key_is_401(client, key):
    assert post(client, {"messages": [{"role": "user", "content": "hi"}]}).status_code == 401
    response = post(client, {"messages": [{"role": "user", "content": "hi"}]}, key=key[:-2] + "xx")
    assert response.status_code == 401
    assert error_of(response)["type"] == "authentication_error"
    assert client.get("/v1/models").status_code == 401


@pytest.mark.parametrize(
    "body,param,message",
    [
        ("{not json", None, "not valid JSON"),
        ("[1, 2]", None, "must be a JSON object"),
        ({"messages": []}, "messages", "non-empty array"),
        ({"messages": "hello"}, "messages", "non-empty array"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "messages", "needs a role"),
        ({"messages": [{"role": ["user"], "content": "x"}]}, "messages", "needs a role"),  # found by the fuzz test
        ({"messages": [{"role": {"user": 1}, "content": "x"}]}, "messages", "needs a role"),
        ({"messages": [{"role": "user", "content": 42}]}, "messages", "must be a string"),
        ({"messages": [{"role": "assistant", "content": "hi"}]}, "messages", "last message must be"),
        ({"messages": [{"role": "user", "content": "hi"}], "stream": "yes"}, "stream", "stream must be a bool"),
        ({"messages": [{"role": "user", "content": "hi"}], "temperature": 7}, "temperature", "between 0 and 2"),
    ],
)
def test_bad_requests_are_400_with_a_clear_error(client, key, body, param, message):
    response = post(client, body, key=key)
    assert response.status_code == 400
    error = error_of(response)
    assert message in error["message"] and error["param"] == param and error["type"] == "invalid_request_error"
    assert not Conversation.objects.exists() and not Turn.objects.exists()


def test_unknown_model_is_404_and_stores_nothing(client, key):
    body = {
        "model": "gpt-17",
        "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "x"}],
    }
    response = post(client, body, key=key)
    assert response.status_code == 404
    assert error_of(response)["code"] == "model_not_found"
    assert not Conversation.objects.exists() and not Message.objects.exists()


def test_a_10_mb_body_is_413(client, key):
    body = json.dumps({"messages": [{"role": "user", "content": "x" * (10 * 1024 * 1024)}]})
    response = post(client, body, key=key)
    assert response.status_code == 413
    assert not Conversation.objects.exists()


def test_models_lists_toolhub_and_the_profiles(client, key):
    ModelProfile.objects.create(
        name="chat-8k", context_window=8192, max_output_tokens=1024, reserved_result_tokens=1024
    )
    data = client.get("/v1/models", headers={"Authorization": f"Bearer {key}"}).json()
    assert [m["id"] for m in data["data"]] == ["toolhub", "chat-8k"]


def test_keys_are_stored_hashed_and_revocable(key):
    stored = ApiKey.objects.get()
    assert key not in (stored.key_hash, stored.prefix) and key.startswith(f"th_{stored.prefix}_")
    assert authenticate(key) == stored
    stored.revoked = True
    stored.save()
    assert authenticate(key) is None


def test_a_key_is_refused_with_a_wrong_secret_or_an_inactive_user_and_comes_with_its_user(
    key, django_assert_num_queries
):
    prefix = ApiKey.objects.get().prefix
    assert authenticate(f"th_{prefix}_not-the-secret") is None
    assert authenticate(key.replace("th_", "tk_", 1)) is None
    found = authenticate(key)
    with django_assert_num_queries(0):
        assert found.user.username == "ops" and found.user.is_active is True
    found.user.is_active = False
    found.user.save()
    assert authenticate(key) is None


def test_create_api_key_prints_the_key_once_on_its_last_line(capsys):
    make_user("operator")
    call_command("create_api_key", "ci-agent")
    key = capsys.readouterr().out.strip().splitlines()[-1]
    assert authenticate(key).name == "ci-agent"


def test_a_key_records_when_it_was_last_used_at_most_once_a_minute(key):
    from agents.access.api_keys import LAST_USED_RESOLUTION

    first = authenticate(key).last_used_at  # the row as read, before this use
    used = ApiKey.objects.get().last_used_at
    assert first is None and used is not None
    authenticate(key)
    assert ApiKey.objects.get().last_used_at == used  # within the minute: no write
    ApiKey.objects.update(last_used_at=used - LAST_USED_RESOLUTION * 2)
    authenticate(key)
    assert ApiKey.objects.get().last_used_at > used - LAST_USED_RESOLUTION


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city",
        "parameters": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]},
    },
}


def weather_call(call_id: str) -> dict:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"location": "Paris"}'},
    }


def ask(text="What's the weather in Paris?", **fields) -> dict:
    return {"messages": [{"role": "user", "content": text}], **fields}


@pytest.mark.parametrize(
    "body,param,code,words",
    [
        (ask(tools=[{**WEATHER_TOOL, "function": {**WEATHER_TOOL["function"], "parameters": {"type": "objekt"}}}]),
         "tools[0].function.parameters", "invalid_tool_schema", "not a valid JSON schema"),
        (ask(tools=[WEATHER_TOOL, WEATHER_TOOL]), "tools[1].function.name", "duplicate_tool_name", "used twice"),
        (ask(tools=[{**WEATHER_TOOL, "function": {**WEATHER_TOOL["function"], "name": f"t{i}"}} for i in range(1000)]),
         "tools", "too_many_tools", "at most 128"),
        (ask(tools=[WEATHER_TOOL], tool_choice={"type": "function", "function": {"name": "get_time"}}),
         "tool_choice", "tool_not_found", "'get_time', which is not among the request's tools"),
        ({"messages": [{"role": "user", "content": "weather?"},
                       {"role": "assistant", "content": None, "tool_calls": [weather_call("call_1")]},
                       {"role": "tool", "tool_call_id": "call_2", "content": "sunny"}]},
         "messages", "invalid_tool_messages", "messages[2]: tool result 'call_2' answers no open tool call"),
        ({"messages": [{"role": "user", "content": "weather?"},
                       {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]},
         "messages", "invalid_tool_messages", "answers no open tool call"),
        (ask(tools=[{**WEATHER_TOOL, "function": {**WEATHER_TOOL["function"], "name": "calculate"}}]),
         "tools[0].function.name", "tool_name_conflict", "'calculate' is the name of a toolhub tool"),
    ],
)  # fmt: skip
def test_bad_client_tools_and_tool_messages_are_400_and_store_nothing(client, key, demo_catalog, body, param, code,
                                                                        words):  # fmt: skip
    response = post(client, body, key=key)
    assert response.status_code == 400
    error = error_of(response)
    assert (error["type"], error["param"], error["code"]) == ("invalid_request_error", param, code)
    assert words in error["message"]
    assert not Conversation.objects.exists() and not Turn.objects.exists()


def test_a_turn_too_long_for_the_model_is_context_length_exceeded_before_anything_runs(client, key):
    response = post(client, ask("word " * 40_000, stream=True), key=key)
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "context_length_exceeded" and error["param"] == "messages"
    assert "maximum context length is 8192 tokens" in error["message"]
    assert re.search(r"the newest turn needs 4\d{4} tokens", error["message"])
    assert not Conversation.objects.exists() and not Turn.objects.exists()


def test_the_client_tools_schemas_count_against_the_context(client, key):
    from agents.openai_api.views import ApiError, check_context_length, parse_request

    tiny = ModelProfile.objects.create(name="tiny", context_window=1200, max_output_tokens=200,
                                       reserved_result_tokens=200)  # fmt: skip
    big = {"type": "object", "properties": {f"field_{i}": {"type": "string", "description": "a field " * 10}
                                            for i in range(40)}}  # fmt: skip
    body = ask("w " * 100, model="tiny")
    check_context_length(tiny, parse_request(json.dumps(body).encode()))  # fits without the tool
    with_tool = body | {"tools": [{"type": "function", "function": {"name": "big", "parameters": big}}]}
    with pytest.raises(ApiError):
        check_context_length(tiny, parse_request(json.dumps(with_tool).encode()))
    response = post(client, with_tool, key=key)
    assert response.status_code == 400 and error_of(response)["code"] == "context_length_exceeded"


def test_a_request_without_model_uses_the_default_model():
    from agents.openai_api.views import DEFAULT_MODEL, parse_request

    assert parse_request(json.dumps(ask()).encode())["model"] == DEFAULT_MODEL == "toolhub"
    assert parse_request(json.dumps(ask(model=None)).encode())["model"] == "toolhub"


def test_tool_results_after_the_user_message_are_a_valid_last_message():
    from agents.openai_api.views import parse_request

    body = {"messages": [{"role": "user", "content": "weather?"},
                         {"role": "assistant", "content": None, "tool_calls": [weather_call("call_1")]},
                         {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}],
            "tools": [WEATHER_TOOL], "tool_choice": "required", "parallel_tool_calls": False}  # fmt: skip
    parsed = parse_request(json.dumps(body).encode())
    assert parsed["messages"][1]["tool_calls"] == [weather_call("call_1")]
    assert parsed["client"].names == ("get_weather",) and parsed["client"].tool_choice == "required"


def test_one_model_is_its_object_and_an_unknown_one_a_json_404(client, key):
    headers = {"Authorization": f"Bearer {key}"}
    assert client.get("/v1/models/toolhub", headers=headers).json() == {
        "id": "toolhub", "object": "model", "created": 0, "owned_by": "toolhub", "context_window": 8192,
        "max_output_tokens": 1024, "upstream_model": "builtin-offline-rule-based", "offline": True}  # fmt: skip
    missing = client.get("/v1/models/gpt-17", headers=headers)
    assert missing.status_code == 404 and missing["Content-Type"] == "application/json"
    assert error_of(missing)["code"] == "model_not_found"
    assert client.get("/v1/models/toolhub").status_code == 401
