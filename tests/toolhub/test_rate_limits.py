"""Requests per minute per API key and per user on /v1 and /mcp, and login POSTs per address: 429 with Retry-After."""

import json

import pytest
from asgiref.sync import sync_to_async

from agents.access.api_keys import create_api_key
from agents.mcp_gateway.access import RATE_LIMITED
from agents.models import Turn
from tests.support.builders import make_user
from tests.support.mcp_asgi import McpAsgiClient
from toolhub import rate_limits

WINDOW_START = 6_000_000.0  # a multiple of 60: the start of a window


@pytest.fixture
def clock(monkeypatch):
    """Time as the rate limits read it, 15 s into a window; `clock.now` moves it."""

    class Clock:
        now = WINDOW_START + 15

    monkeypatch.setattr(rate_limits.time, "time", lambda: Clock.now)
    return Clock


@pytest.fixture
def limit(settings):
    settings.TOOLHUB_RATE_LIMIT_PER_MINUTE = 3
    settings.TOOLHUB_USER_RATE_LIMIT_PER_MINUTE = 100
    return 3


def models(client, key):
    return client.get("/v1/models", headers={"Authorization": f"Bearer {key}"})


def test_a_window_counts_up_to_its_limit_then_says_when_it_resets():
    assert [rate_limits.take("b", limit=2, what="key", now=WINDOW_START + 10) for _ in range(2)] == [None, None]
    exceeded = rate_limits.take("b", limit=2, what="key", now=WINDOW_START + 10)
    assert exceeded.retry_after == 50 and exceeded.limit == 2 and "2 requests per minute" in exceeded.message
    assert rate_limits.take("b", limit=2, what="key", now=WINDOW_START + 60) is None  # the next window
    assert rate_limits.take("b", limit=0, what="key", now=WINDOW_START + 60) is None  # 0: no limit


@pytest.mark.django_db
def test_the_request_past_a_keys_limit_is_429_with_retry_after_and_an_openai_error(client, clock, limit):
    key = create_api_key(user=make_user(), name="a")[1]
    assert [models(client, key).status_code for _ in range(limit)] == [200] * limit
    refused = models(client, key)
    assert refused.status_code == 429 and refused["Retry-After"] == "45"
    assert refused.json()["error"] == {
        "message": "Rate limit reached: this API key may make 3 requests per minute. Try again in 45 s.",
        "type": "rate_limit_error",
        "param": None,
        "code": "rate_limit_exceeded",
    }


@pytest.mark.django_db
def test_another_key_is_not_affected_and_the_window_resets(client, clock, limit):
    first = create_api_key(user=make_user("first"), name="a")[1]
    second = create_api_key(user=make_user("second"), name="b")[1]
    for _ in range(limit + 1):
        models(client, first)
    assert models(client, first).status_code == 429
    assert models(client, second).status_code == 200
    clock.now = WINDOW_START + 60  # the next minute
    assert models(client, first).status_code == 200


@pytest.mark.django_db
def test_a_users_keys_share_the_users_limit(client, clock, settings):
    settings.TOOLHUB_RATE_LIMIT_PER_MINUTE, settings.TOOLHUB_USER_RATE_LIMIT_PER_MINUTE = 100, 4
    user = make_user()
    keys = [create_api_key(user=user, name=name)[1] for name in ("a", "b")]
    assert [models(client, keys[i % 2]).status_code for i in range(5)] == [200, 200, 200, 200, 429]
    assert "this user may make 4" in models(client, keys[1]).json()["error"]["message"]


@pytest.mark.django_db
def test_a_limited_chat_request_starts_no_turn(client, clock, settings):
    settings.TOOLHUB_RATE_LIMIT_PER_MINUTE = 1
    key = create_api_key(user=make_user(), name="a")[1]
    models(client, key)
    body = {"messages": [{"role": "user", "content": "What is 2 + 2?"}]}
    response = client.post("/v1/chat/completions", json.dumps(body), content_type="application/json",
                           headers={"Authorization": f"Bearer {key}"})  # fmt: skip
    assert response.status_code == 429 and response.json()["error"]["code"] == "rate_limit_exceeded"
    assert not Turn.objects.exists()


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_mcp_past_the_limit_is_http_429_with_a_json_rpc_error(mcp_endpoint, clock, limit):
    def keys():
        return (create_api_key(user=make_user("first"), name="a")[1],
                create_api_key(user=make_user("second"), name="b")[1])  # fmt: skip

    first, second = await sync_to_async(keys)()
    client = McpAsgiClient(mcp_endpoint, first)
    assert (await client.initialize()).status == 200  # initialize and its notification: two requests
    assert (await client.list_tools()).status == 200
    refused = await client.list_tools()
    assert refused.status == 429 and refused.headers["retry-after"] == "45"
    assert refused.messages == [{"jsonrpc": "2.0", "id": None, "error": {
        "code": RATE_LIMITED, "message": "Rate limit reached: this API key may make 3 requests per minute. "
        "Try again in 45 s."}}]  # fmt: skip
    assert (await McpAsgiClient(mcp_endpoint, second).initialize()).status == 200
    clock.now = WINDOW_START + 60
    assert (await client.list_tools()).status == 200


@pytest.mark.django_db
def test_login_posts_past_the_limit_are_429_with_retry_after(client, clock, settings):
    settings.TOOLHUB_LOGIN_RATE_LIMIT_PER_MINUTE = 2
    make_user("ops", password="a-long-test-password")
    wrong = {"username": "ops", "password": "wrong"}
    assert [client.post("/login/", wrong).status_code for _ in range(2)] == [200, 200]
    refused = client.post("/login/", {"username": "ops", "password": "a-long-test-password"})
    assert refused.status_code == 429 and refused["Retry-After"] == "45"
    assert "Too many requests" in refused.content.decode()
    assert client.get("/login/").status_code == 200  # the form still shows
    clock.now = WINDOW_START + 60
    assert client.post("/login/", {"username": "ops", "password": "a-long-test-password"}).status_code == 302


def test_an_unreachable_cache_lets_requests_through(settings):
    down = {"LOCATION": "redis://127.0.0.1:1/0", "OPTIONS": {"socket_connect_timeout": 1}}
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", **down}}
    assert [rate_limits.take("down", limit=1, what="API key") for _ in range(3)] == [None, None, None]
