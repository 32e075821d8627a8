"""Whose connection an MCP call goes through (shared, per user, per session), its bounds, and what a server may
ask the caller during a call (elicitation, sampling), against a real stdio server (tests/support/asking_mcp_server.py).
"""

import asyncio
import json
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import mcp_types as types
import pytest
from django.conf import settings

from catalog.mcp_client import client as mcp_client
from catalog.mcp_client.callers import Caller, calling_as, connection_owner, elicitation_problem
from catalog.mcp_client.client import Endpoint, call_tool
from catalog.models import McpServer

pytestmark = pytest.mark.django_db

ASKING = ["-m", "tests.support.asking_mcp_server"]


@pytest.fixture(autouse=True)
def _close_connections():
    yield
    mcp_client.close_all()


def asking_server(scope: str = McpServer.ConnectionScope.PER_USER, name: str = "asking", **fields) -> McpServer:
    return McpServer.objects.create(name=name, command=sys.executable, args=ASKING, connection_scope=scope,
                                    **fields)  # fmt: skip


def call_as(caller: Caller | None, server: McpServer, tool: str, value: str = "") -> str:
    if caller is None:
        result = call_tool(server, tool, {"value": value})
    else:
        with calling_as(caller):
            result = call_tool(server, tool, {"value": value})
    assert not result.is_error, result.content
    return result.content


def owned_connections() -> list[tuple[str, str]]:
    thread = mcp_client._loop_state["thread"]
    return sorted(key for key in thread.connections if key[1])


ALICE, BOB = Caller(user_id=1, session_key="mcp:a1"), Caller(user_id=2, session_key="mcp:b1")


def test_a_per_user_server_keeps_one_state_per_user_and_a_shared_one_keeps_one_for_everybody():
    server = asking_server()
    call_as(ALICE, server, "remember", "alice's")
    call_as(BOB, server, "remember", "bob's")
    assert json.loads(call_as(Caller(user_id=1, session_key="mcp:a2"), server, "recall")) == ["alice's"]
    assert json.loads(call_as(BOB, server, "recall")) == ["bob's"]

    server.connection_scope = McpServer.ConnectionScope.SHARED
    server.save()
    call_as(ALICE, server, "remember", "alice's")
    assert json.loads(call_as(BOB, server, "recall")) == ["alice's"]


def test_a_per_session_server_keeps_one_state_per_session_and_a_turn_falls_back_to_nothing_shared():
    server = asking_server(McpServer.ConnectionScope.PER_SESSION)
    call_as(ALICE, server, "remember", "first session")
    assert json.loads(call_as(Caller(user_id=1, session_key="mcp:a2"), server, "recall")) == []
    assert json.loads(call_as(ALICE, server, "recall")) == ["first session"]
    assert connection_owner(McpServer.ConnectionScope.PER_SESSION, Caller(user_id=7)) == "users/7"
    assert connection_owner(McpServer.ConnectionScope.PER_USER, Caller()) == ""
    assert connection_owner(McpServer.ConnectionScope.SHARED, ALICE) == ""


def test_a_per_user_stdio_server_runs_in_the_users_own_directory_which_home_names_in_its_arguments():
    server = asking_server(env={"STATE": "{home}/state.json"})
    where = Path(call_as(ALICE, server, "where"))
    assert where == Path(settings.TOOLHUB_MCP_SERVERS_DIR) / "asking" / "users" / "1"
    assert Path(call_as(None, server, "where")) == Path(settings.TOOLHUB_MCP_SERVERS_DIR) / "asking"


def test_a_sessions_directory_is_removed_when_its_connection_closes():
    server = asking_server(McpServer.ConnectionScope.PER_SESSION)
    where = Path(call_as(ALICE, server, "where"))
    assert where.parent.name == "sessions" and "a1" not in where.name  # a digest, never the session id
    mcp_client.disconnect(server)
    assert not where.exists()


def test_idle_per_user_connections_are_closed_and_the_user_gets_a_new_one(settings):
    settings.TOOLHUB_MCP_IDLE_SECONDS = 0.3
    server = asking_server()
    call_as(ALICE, server, "remember", "kept in the process")
    assert owned_connections() == [("asking", "users/1")]
    deadline = time.monotonic() + 10
    while owned_connections():
        assert time.monotonic() < deadline, "the idle connection was not closed"
        time.sleep(0.05)
    assert json.loads(call_as(ALICE, server, "recall")) == []  # a new process


def test_past_the_most_connections_the_least_recently_used_idle_one_is_closed(settings):
    settings.TOOLHUB_MCP_MAX_CONNECTIONS = 2
    server = asking_server()
    for user_id in (1, 2, 3):
        call_as(Caller(user_id=user_id), server, "recall")
    assert owned_connections() == [("asking", "users/2"), ("asking", "users/3")]


def test_a_server_asking_for_input_gets_the_callers_answer_within_the_calls_time(settings):
    settings.TOOLHUB_MCP_TIMEOUT = 20
    asked, seconds = [], []

    async def elicit(params, left):
        asked.append(params)
        seconds.append(left)
        return types.ElicitResult(action="accept", content={"answer": "42"})

    answer = call_as(Caller(user_id=1, elicit=elicit), asking_server(), "ask", "How many?")
    assert answer == 'action=accept content={"answer": "42"}'
    assert asked[0].message == "How many?" and asked[0].requested_schema["required"] == ["answer"]
    assert 0 < seconds[0] < 20  # what is left of the tool call's time: the caller's answer must come within it


def test_a_server_asking_a_caller_that_cannot_answer_is_told_why():
    answer = call_as(Caller(user_id=1, cannot_ask="not supported for this caller"), asking_server(), "ask", "Hi?")
    assert answer == "error: toolhub declined the elicitation: not supported for this caller."
    assert "no caller toolhub can ask" in call_as(None, asking_server(McpServer.ConnectionScope.SHARED, name="s"),
                                                  "ask", "Hi?")  # fmt: skip


def test_a_malformed_elicitation_is_refused_without_asking_the_caller():
    asked = []

    async def elicit(params, left):
        asked.append(params)
        return types.ElicitResult(action="decline")

    answer = call_as(Caller(user_id=1, elicit=elicit), asking_server(), "ask_malformed", "Where?")
    assert answer.startswith("error: toolhub declined the elicitation: it is malformed: field 'address' has type")
    assert asked == []


def test_elicitation_problem_accepts_the_forms_mcp_allows_and_names_what_it_does_not():
    def form(properties, **extra):
        schema = {"type": "object", "properties": properties, **extra}
        return types.ElicitRequestFormParams(message="m", requested_schema=schema)

    enum_list = {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}}
    assert elicitation_problem(form({"n": {"type": "integer", "default": 3}, "tags": enum_list})) is None
    assert "not of enum strings" in elicitation_problem(form({"tags": {"type": "array", "items": {"type": "string"}}}))
    assert "required names fields" in elicitation_problem(form({}, required=["missing"]))
    assert "not an http(s) URL" in elicitation_problem(
        types.ElicitRequestURLParams(message="m", url="javascript:alert(1)", elicitation_id="1")
    )


def test_sampling_goes_to_the_caller_with_max_tokens_cut_to_the_limit(settings):
    settings.TOOLHUB_MCP_SAMPLING_MAX_TOKENS = 256
    asked = []

    async def sample(params):
        asked.append(params)
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="hello"),
                                         model="test-model")  # fmt: skip

    assert call_as(Caller(user_id=1, sample=sample), asking_server(), "sample", "Say hello") == "sampled: hello"
    assert asked[0].max_tokens == 256  # the server asked for 100,000


def test_a_server_that_samples_in_a_loop_is_cut_with_an_error(settings):
    settings.TOOLHUB_MCP_SAMPLING_PER_CALL = 3
    answered = []

    async def sample(params):
        answered.append(params)
        return types.ErrorData(code=types.INVALID_REQUEST, message="no")

    with calling_as(Caller(user_id=1, sample=sample)):
        result = call_tool(asking_server(), "sample_forever", {})
    assert result.is_error
    assert "asked for more than 3 samplings during one tool call" in result.content
    assert len(answered) == 3


def test_a_servers_headers_and_environment_never_show_in_its_endpoints_repr():
    server = McpServer(name="remote", transport="streamable_http", url="https://example.test/mcp",
                       headers={"Authorization": "Bearer secret-token"}, env={"API_KEY": "secret-key"})  # fmt: skip
    assert "secret" not in repr(Endpoint.of(server))


def test_a_servers_token_reaches_neither_a_caller_nor_a_log_when_its_requests_are_declined_or_cut(settings, caplog):
    settings.TOOLHUB_MCP_SAMPLING_PER_CALL = 2
    server = asking_server(env={"API_TOKEN": "sekrit-token-123"})
    seen = []

    async def sample(params):
        seen.append(params.model_dump_json())
        return types.ErrorData(code=types.INVALID_REQUEST, message="no")

    caller = Caller(user_id=1, sample=sample)
    with calling_as(caller):
        answers = [call_tool(server, tool, {"value": "?"}).content for tool in ("ask_malformed", "sample_forever")]
    assert "malformed" in answers[0] and "more than 2 samplings" in answers[1]
    assert "sekrit" not in "".join(answers + seen) + caplog.text
    assert "declined" in caplog.text


def test_with_two_calls_in_flight_on_one_connection_a_server_request_is_declined_as_ambiguous():
    server = asking_server()
    first_asked, second_done = threading.Event(), threading.Event()

    async def elicit_after_the_second(params, left):
        first_asked.set()
        await asyncio.to_thread(second_done.wait, 20)
        return types.ElicitResult(action="accept", content={"answer": "first"})

    def first():
        with calling_as(Caller(user_id=1, elicit=elicit_after_the_second)):
            return call_tool(server, "ask", {"value": "first?"}).content

    with ThreadPoolExecutor(1) as pool:
        first_answer = pool.submit(first)
        assert first_asked.wait(20)  # the first call is waiting for its caller's answer
        second_answer = call_as(Caller(user_id=1), server, "ask", "second?")
        second_done.set()
        assert first_answer.result(timeout=30) == 'action=accept content={"answer": "first"}'
    assert second_answer == (
        "error: toolhub declined the elicitation: 2 tool calls are in flight on this connection, and a request names "
        "none of them."
    )
