"""The OpenAI-compatible API refuses bad input with OpenAI-style errors and stores nothing half-way."""

import json

import pytest
from django.core.management import call_command

from agents.api_keys import authenticate, create_api_key
from agents.models import ApiKey, Conversation, Message, ModelProfile, Turn
from tests.builders import make_user

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


def test_create_api_key_prints_the_key_once_on_its_last_line(capsys):
    make_user("operator")
    call_command("create_api_key", "ci-agent")
    key = capsys.readouterr().out.strip().splitlines()[-1]
    assert authenticate(key).name == "ci-agent"


def test_a_key_records_when_it_was_last_used_at_most_once_a_minute(key):
    from agents.api_keys import LAST_USED_RESOLUTION

    first = authenticate(key).last_used_at  # the row as read, before this use
    used = ApiKey.objects.get().last_used_at
    assert first is None and used is not None
    authenticate(key)
    assert ApiKey.objects.get().last_used_at == used  # within the minute: no write
    ApiKey.objects.update(last_used_at=used - LAST_USED_RESOLUTION * 2)
    authenticate(key)
    assert ApiKey.objects.get().last_used_at > used - LAST_USED_RESOLUTION
