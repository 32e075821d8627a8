"""Log lines carry the request, turn, conversation, trace and channel of the work they belong to, as JSON when asked."""

import asyncio
import io
import json
import logging

import pytest
from asgiref.sync import async_to_sync
from asgiref.testing import ApplicationCommunicator
from django.core.asgi import get_asgi_application

from agents import tasks
from agents.models import Conversation, Turn
from tests.support.builders import make_user
from toolhub.log_context import ContextFilter, JsonFormatter, bound, with_request_context

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.fixture
def asgi_application():
    """Django's ASGI handler, made before json_lines: making it sets up logging again, which drops added handlers."""
    return get_asgi_application()


@pytest.fixture
def json_lines():
    """What the root logger writes through toolhub's filter and JSON formatter, one parsed object a line."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(ContextFilter())
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    finally:
        root.removeHandler(handler)


def test_a_json_line_has_the_bound_fields_and_the_exception(json_lines):
    with bound(turn_id=7, conversation_id=3, channel="api"):
        try:
            raise ValueError("boom")
        except ValueError:
            logging.getLogger("toolhub.test").exception("it failed: %s", "badly")
    logging.getLogger("toolhub.test").warning("after")

    failed, after = json_lines()
    assert failed["message"] == "it failed: badly" and failed["level"] == "ERROR" and failed["logger"] == "toolhub.test"
    assert (failed["turn_id"], failed["conversation_id"], failed["channel"]) == (7, 3, "api")
    assert "ValueError: boom" in failed["exception"] and failed["time"].endswith("+00:00")
    assert "turn_id" not in after  # the context ended with its block


@pytest.mark.django_db
def test_a_request_gets_an_id_on_its_answer_a_callers_plain_id_is_kept(client):
    fresh = client.get("/login/")
    kept = client.get("/login/", headers={"X-Request-ID": "proxy-id.42"})
    replaced = client.get("/login/", headers={"X-Request-ID": "bad id\twith spaces"})

    assert len(fresh["X-Request-ID"]) == 32
    assert kept["X-Request-ID"] == "proxy-id.42"
    assert replaced["X-Request-ID"] != "bad id\twith spaces" and len(replaced["X-Request-ID"]) == 32


@pytest.mark.django_db(transaction=True)
def test_through_asgi_even_djangos_own_not_found_line_carries_the_request(asgi_application, json_lines):
    application = with_request_context(asgi_application)
    scope = {"type": "http", "method": "GET", "path": "/v1/no-such-thing", "query_string": b"", "scheme": "http",
             "server": ("testserver", 80), "client": ("127.0.0.1", 5000),
             "headers": [(b"host", b"testserver"), (b"traceparent", TRACEPARENT.encode())]}  # fmt: skip

    async def request():
        communicator = ApplicationCommunicator(application, scope)
        await communicator.send_input({"type": "http.request", "body": b""})
        start = await communicator.receive_output(timeout=10)
        await communicator.receive_output(timeout=10)
        return start

    start = async_to_sync(request)()

    (request_id,) = [value.decode() for key, value in start["headers"] if key.lower() == b"x-request-id"]
    not_found = next(line for line in json_lines() if line["logger"] == "django.request")
    assert not_found["request_id"] == request_id and not_found["channel"] == "api"
    assert not_found["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736"


@pytest.mark.django_db
def test_what_a_turn_logs_carries_its_turn_and_conversation(monkeypatch, json_lines):
    conversation = Conversation.objects.create(owner=make_user())
    turn = Turn.objects.create(conversation=conversation)
    monkeypatch.setattr(tasks.runtime, "run_turn", lambda turn_id: logging.getLogger("agents.test").info("running"))

    tasks.run_turn(turn.pk)

    (line,) = [line for line in json_lines() if line["logger"] == "agents.test"]
    assert (line["turn_id"], line["conversation_id"]) == (turn.pk, conversation.pk)


def test_an_asgi_app_outside_django_gets_the_same_context():
    seen = {}

    async def app(scope, receive, send):
        seen["record"] = logging.LogRecord("mcp", logging.INFO, __file__, 1, "x", None, None)
        ContextFilter().filter(seen["record"])
        await send({"type": "http.response.start", "status": 200, "headers": []})

    sent = []

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "path": "/mcp", "headers": [(b"traceparent", TRACEPARENT.encode())]}
    asyncio.run(with_request_context(app)(scope, None, send))

    record = seen["record"]
    assert record.channel == "mcp" and record.trace_id == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert (b"X-Request-ID", record.request_id.encode()) in sent[0]["headers"]
