"""POST /v1/chat/completions refuses oversized, deep, unstorable or mistyped input with a 400/413 naming the field,
in bounded time, and stores nothing; a tool name with control characters in a dashboard path is a 404."""

import json

import pytest

from agents.access.api_keys import create_api_key
from agents.models import Conversation, Turn
from agents.openai_api.body_limits import check_chat_request, json_depth
from agents.openai_api.views import parse_request
from tests.support.builders import make_user

pytestmark = pytest.mark.django_db
URL = "/v1/chat/completions"
HI = {"role": "user", "content": "hi"}


@pytest.fixture
def key():
    return create_api_key(user=make_user(), name="test")[1]


def post(client, key, body):
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    return client.post(URL, data=data, content_type="application/json", headers={"Authorization": f"Bearer {key}"})


def refused(response, status=400) -> dict:
    assert response.status_code == status, response.content[:300]
    assert not Conversation.objects.exists() and not Turn.objects.exists()
    return response.json()["error"]


def test_a_body_over_the_cap_is_413_before_it_is_parsed(client, key, settings):
    settings.TOOLHUB_API_MAX_BODY_BYTES = 1000
    error = refused(post(client, key, {"messages": [{"role": "user", "content": "x" * 2000}]}), 413)
    assert error["code"] == "request_too_large" and "1000 bytes" in error["message"]
    assert post(client, key, {"messages": [HI], "stream": "no"}).status_code == 400  # small bodies still parse


def test_100000_nested_brackets_are_400_without_recursion(client, key):
    error = refused(post(client, key, '{"messages": ' + "[" * 100_000 + "]" * 100_000 + "}"))
    assert error["code"] == "too_deep" and "64 levels" in error["message"]


def test_depth_counts_structure_not_brackets_inside_strings():
    assert json_depth(b'{"a": [1, {"b": "[[[[[[\\"]]"}]}') == 3
    assert json_depth(b"[" * 10 + b"]" * 10) == 10
    assert json_depth(b'"just a string"') == 0


@pytest.mark.parametrize(
    "message,field",
    [
        ({"role": "user", "content": "nul \x00 byte"}, "messages[0].content"),
        ({"role": "user", "content": "lone \ud800 surrogate"}, "messages[0].content"),
        ({"role": "user", "content": [{"type": "text", "text": "a\x00"}]}, "messages[0].content[0].text"),
    ],
)
def test_nul_bytes_and_lone_surrogates_are_400_naming_the_field(client, key, message, field):
    body = json.dumps({"messages": [message]})  # ensure_ascii: the escapes \u0000 and \ud800 as a client sends them
    error = refused(post(client, key, body))
    assert error["message"].startswith(field) and "NUL byte or a lone surrogate" in error["message"]
    assert error["param"] == "messages"


def test_a_nul_byte_in_the_model_name_names_model(client, key):
    error = refused(post(client, key, {"model": "a\x00b", "messages": [HI]}))
    assert error["param"] == "model" and error["message"].startswith("model ")


def test_more_messages_than_the_cap_is_400(client, key, settings):
    error = refused(post(client, key, {"messages": [HI] * 1001}))
    assert error["code"] == "too_many_messages" and "at most 1000" in error["message"]
    settings.TOOLHUB_API_MAX_MESSAGES = 3
    refused(post(client, key, {"messages": [HI] * 4}))


@pytest.mark.parametrize(
    "message,problem",
    [
        ({"role": "assistant", "content": None, "tool_calls": "notalist"}, "messages[0].tool_calls must be an array"),
        ({"role": "assistant", "tool_calls": [42]}, "messages[0].tool_calls[0] must be an object"),
        (
            {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": 7}}]},
            "messages[0].tool_calls[0].function needs a name",
        ),
        ({"role": "user", "content": {"text": "hi"}}, "messages[0].content must be a string"),
        ({"role": "user", "content": [{"type": "image_url"}]}, "messages[0].content[0] must be an object of type"),
        # found by the fuzz test (tests/agents/openai_api/test_api_fuzz.py): an unhashable part type was a 500
        ({"role": "user", "content": [{"type": ["text"]}]}, "messages[0].content[0] must be an object of type"),
        ({"role": "user", "content": [{"type": {"text": 1}}]}, "messages[0].content[0] must be an object of type"),
        ({"role": "tool", "content": "42", "tool_call_id": 5}, "messages[0].tool_call_id must be a string"),
    ],
)
def test_wrong_types_in_a_message_are_400_naming_the_field(client, key, message, problem):
    error = refused(post(client, key, {"messages": [message, HI]}))
    assert error["message"].startswith(problem) and error["param"] == "messages"


def test_well_formed_tool_calls_are_still_accepted(rf):
    call = {"id": "c1", "type": "function", "function": {"name": "calculate", "arguments": '{"expression": "1+1"}'}}
    history = [
        {"role": "user", "content": "add"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "2"},
        {"role": "user", "content": [{"type": "text", "text": "and 3+3?"}]},
    ]
    request = rf.post(URL, data=json.dumps({"messages": history}), content_type="application/json")
    parsed = parse_request(check_chat_request(request))
    assert parsed["messages"][1]["tool_calls"] == [call] and parsed["messages"][3]["content"] == "and 3+3?"


@pytest.mark.parametrize("path", ["/catalog/%00/", "/catalog/a%0Ab/", "/policies/%00/", "/policies/%1F/simulate"])
def test_a_tool_name_with_control_characters_is_404(admin_client, path):
    assert admin_client.get(path).status_code == 404
