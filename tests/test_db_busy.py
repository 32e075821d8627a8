"""No free database connection is a 503 with Retry-After (JSON under /v1/), never a 500; streams end with a frame."""

import json

import pytest
from django.db import OperationalError
from psycopg_pool import PoolTimeout

from agents import api
from agents.api_keys import create_api_key
from tests.builders import make_user
from toolhub.db_busy import RETRY_AFTER_SECONDS, busy_response, is_database_busy


def pool_timeout() -> OperationalError:
    error = OperationalError("couldn't get a connection after 10.00 sec")
    error.__cause__ = PoolTimeout("couldn't get a connection after 10.00 sec")
    return error


def test_an_exhausted_pool_or_a_full_server_is_busy_other_errors_are_not():
    assert is_database_busy(pool_timeout())
    assert is_database_busy(OperationalError("FATAL: sorry, too many clients already"))
    assert not is_database_busy(OperationalError("relation agents_turn does not exist"))
    assert not is_database_busy(ValueError("couldn't get a connection"))


@pytest.mark.django_db
def test_an_api_request_that_gets_no_connection_is_a_503_json_error_with_retry_after(client, monkeypatch):
    _, key = create_api_key(user=make_user(), name="busy")

    def exhausted(_key):
        raise pool_timeout()

    monkeypatch.setattr(api, "authenticate", exhausted)
    response = client.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]},
                           content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {key}")  # fmt: skip
    assert response.status_code == 503
    assert response["Retry-After"] == str(RETRY_AFTER_SECONDS)
    assert response.json()["error"]["code"] == "database_busy"


def test_a_page_that_gets_no_connection_is_a_503_with_retry_after():
    response = busy_response("/catalog/")
    assert response.status_code == 503 and response["Retry-After"] == str(RETRY_AFTER_SECONDS)
    assert response["Content-Type"].startswith("text/plain")


@pytest.mark.asyncio
async def test_a_stream_that_loses_the_database_ends_with_an_error_frame_and_done(monkeypatch):
    async def failing(turn_id, *, start):
        yield {"type": "status", "payload": {"message": "working"}, "sequence": 1}
        raise pool_timeout()

    monkeypatch.setattr(api, "turn_events", failing)
    frames = [frame async for frame in api.sse_stream(1, "toolhub")]
    assert frames[-1] == "data: [DONE]\n\n"
    assert json.loads(frames[-2].removeprefix("data: "))["error"]["code"] == "database_busy"
