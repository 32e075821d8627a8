"""Per-user upstream connections and what an upstream server asks during a call, through real processes.

`@modelcontextprotocol/server-memory` (npm, pinned in tests/npm/package-lock.json) keeps a knowledge graph in a
file; imported per user, with MEMORY_FILE_PATH={home}/memory.jsonl, each user gets a graph of their own, whether the
call comes through /mcp on Daphne (the web process) or from a /v1 turn a Celery worker runs. The asking server
(tests/support/asking_mcp_server.py) asks for input and for a model completion during its calls: through /mcp the
calling client answers when it declared the capability, and is not asked when it did not; in a turn a Celery worker
runs, the turn's model profile answers the sampling and an operator the elicitation, in the console (declined when
nobody answers within the tool call's time).
"""

import asyncio
import concurrent.futures
import json
import sys
import time
from contextlib import asynccontextmanager

import httpx2
import mcp_types as types
import openai
import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from agents.access.api_keys import create_api_key
from agents.models import Message, ServerQuestion, TurnEvent
from catalog.mcp_client import client as mcp_client
from catalog.mcp_client.sync import sync_server
from catalog.models import McpServer, Tool
from tests.support.builders import make_policy, make_user
from tests.support.scripted_openai import ScriptedOpenAI
from tests.support.servers import ROOT, celery_worker, daphne, database_env
from toolhub.celery import app

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

MEMORY = ROOT / "tests/npm/node_modules/@modelcontextprotocol/server-memory/dist/index.js"
MEMORY_TOOLS = ["create_entities", "read_graph"]
ASKING_TOOLS = ["ask", "ask_malformed", "sample", "sample_forever"]


def memory_server() -> McpServer:
    assert MEMORY.exists(), "server-memory is not installed: run `make test-servers` (make test does)"
    server = McpServer.objects.create(name="memory", command="node", args=[str(MEMORY)],
                                      env={"MEMORY_FILE_PATH": "{home}/memory.jsonl"})  # fmt: skip
    assert server.connection_scope == McpServer.ConnectionScope.PER_USER  # a new server's default
    assert sync_server(server).ok
    for name in MEMORY_TOOLS:
        make_policy(Tool.objects.get(name=name))
    Tool.objects.filter(name__in=MEMORY_TOOLS).update(always_load=True)
    return server


def entity(name: str) -> dict:
    return {"entities": [{"name": name, "entityType": "person", "observations": [f"{name} was here"]}]}


@asynccontextmanager
async def mcp_session(base: str, key: str, **callbacks):
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=120)
    async with http, streamable_http_client(f"{base}/mcp", http_client=http) as (read, write):
        async with ClientSession(read, write, **callbacks) as session:
            await session.initialize()
            yield session


def graph_names(result) -> set[str]:
    assert not result.is_error, result.content
    return {node["name"] for node in json.loads(result.content[0].text)["entities"]}


def test_two_users_get_two_memory_graphs_through_mcp_on_daphne(tmp_path):
    memory_server()
    _, alice = create_api_key(user=make_user(username="alice"), name="alice")
    _, bob = create_api_key(user=make_user(username="bob"), name="bob")
    mcp_client.close_all()  # Daphne opens its own connections

    async def scenario(base):
        async with mcp_session(base, alice) as session:
            created = await session.call_tool("create_entities", entity("alice-fact"))
            assert not created.is_error, created.content
        async with mcp_session(base, bob) as session:
            assert graph_names(await session.call_tool("read_graph", {})) == set()
            await session.call_tool("create_entities", entity("bob-fact"))
        async with mcp_session(base, alice) as session:  # another session of alice's: her graph
            return graph_names(await session.call_tool("read_graph", {}))

    with daphne(database_env(TOOLHUB_MCP_SERVERS_DIR=str(tmp_path))) as base:  # no graph of an earlier run
        assert asyncio.run(scenario(base)) == {"alice-fact"}
    assert sorted(path.parent.name for path in tmp_path.glob("memory/users/*/memory.jsonl")) == sorted(
        str(user.pk) for user in get_user_model().objects.filter(username__in=["alice", "bob"])
    )


def test_two_users_get_two_memory_graphs_in_turns_a_celery_worker_runs(tmp_path):
    memory_server()
    _, alice = create_api_key(user=make_user(username="alice"), name="alice")
    _, bob = create_api_key(user=make_user(username="bob"), name="bob")
    mcp_client.close_all()
    with ScriptedOpenAI() as model:
        env = database_env(TOOLHUB_MODEL_BASE_URL=model.base_url, TOOLHUB_MODEL="scripted",
                           TOOLHUB_MODEL_RETRIES="0", TOOLHUB_WARM_START="0",
                           TOOLHUB_MCP_SERVERS_DIR=str(tmp_path))  # fmt: skip
        with celery_worker(env, app), daphne(env) as base:

            def turn(key: str, tool: str, arguments: dict) -> None:
                model.steps = [{"tool_calls": [{"name": tool, "arguments": arguments}]}, {"content": "Done."}]
                client = openai.OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0, timeout=120)
                answer = client.chat.completions.create(
                    model="toolhub", messages=[{"role": "user", "content": f"Use {tool}"}]
                )
                assert answer.choices[0].message.content == "Done."

            turn(alice, "create_entities", entity("alice-fact"))
            turn(bob, "read_graph", {})
            turn(bob, "create_entities", entity("bob-fact"))
            turn(alice, "read_graph", {})

    reads = Message.objects.filter(role=Message.Role.TOOL, content__contains="entities").order_by("id")
    graphs = [(m.conversation.owner.username, json.loads(m.content)) for m in reads if '"relations"' in m.content]
    assert [(owner, {node["name"] for node in graph["entities"]}) for owner, graph in graphs] == [
        ("bob", set()),
        ("alice", {"alice-fact"}),
    ]


@pytest.fixture
def asking_toolhub():
    server = McpServer.objects.create(name="asking", command=sys.executable,
                                      args=["-m", "tests.support.asking_mcp_server"])  # fmt: skip
    assert sync_server(server).ok
    for name in ASKING_TOOLS:
        make_policy(Tool.objects.get(name=name))
    _, key = create_api_key(user=make_user(username="asker"), name="asker")
    mcp_client.close_all()
    with daphne(database_env(TOOLHUB_MCP_SAMPLING_PER_CALL="3", TOOLHUB_MCP_SAMPLING_MAX_TOKENS="500")) as base:
        yield base, key


def test_an_upstream_elicitation_and_sampling_are_answered_by_the_calling_mcp_client(asking_toolhub):
    base, key = asking_toolhub
    asked: list = []

    async def elicitation(context, params):
        asked.append(params)
        return types.ElicitResult(action="accept", content={"answer": "blue"})

    async def sampling(context, params):
        asked.append(params)
        reply = types.TextContent(type="text", text=f"{len(params.messages)} message(s) read")
        return types.CreateMessageResult(role="assistant", content=reply, model="client-model")

    async def scenario():
        async with mcp_session(base, key, elicitation_callback=elicitation, sampling_callback=sampling) as session:
            elicited = await session.call_tool("ask", {"value": "Favourite colour?"})
            sampled = await session.call_tool("sample", {"value": "Say something"})
            looping = await session.call_tool("sample_forever", {})
            return elicited, sampled, looping

    elicited, sampled, looping = asyncio.run(scenario())
    assert elicited.content[0].text == 'action=accept content={"answer": "blue"}'
    assert sampled.content[0].text == "sampled: 1 message(s) read"
    assert asked[0].message == "Favourite colour?" and asked[0].requested_schema["required"] == ["answer"]
    assert asked[1].max_tokens == 500  # the server asked for 100,000: cut to TOOLHUB_MCP_SAMPLING_MAX_TOKENS
    assert looping.is_error and "asked for more than 3 samplings during one tool call" in looping.content[0].text
    assert len(asked) == 2 + 3


def test_an_upstream_request_a_client_did_not_declare_or_a_malformed_one_is_declined_with_the_reason(asking_toolhub):
    base, key = asking_toolhub
    asked: list = []

    async def elicitation(context, params):
        asked.append(params)
        return types.ElicitResult(action="decline")

    async def scenario():
        async with mcp_session(base, key) as session:  # declares neither elicitation nor sampling
            plain = [await session.call_tool(tool, {"value": "?"}) for tool in ("ask", "sample")]
        async with mcp_session(base, key, elicitation_callback=elicitation) as session:
            malformed = await session.call_tool("ask_malformed", {"value": "Where?"})
        return [result.content[0].text for result in (*plain, malformed)]

    assert asyncio.run(scenario()) == [
        "error: toolhub declined the elicitation: the MCP client that made this call did not declare the "
        "elicitation capability.",
        "error: toolhub declined the sampling request: the MCP client that made this call did not declare the "
        "sampling capability.",
        "error: toolhub declined the elicitation: it is malformed: field 'address' has type 'object'; a form field "
        "is a string, number, integer, boolean or enum list.",
    ]
    assert asked == []


def asking_server_in_turns() -> str:
    """The asking server with ask and sample always loaded, and an API key of the turns' owner."""
    server = McpServer.objects.create(name="asking", command=sys.executable,
                                      args=["-m", "tests.support.asking_mcp_server"])  # fmt: skip
    assert sync_server(server).ok
    for name in ("ask", "sample"):
        make_policy(Tool.objects.get(name=name))
    Tool.objects.filter(name__in=["ask", "sample"]).update(always_load=True)
    _, key = create_api_key(user=make_user(username="turner"), name="turner")
    mcp_client.close_all()
    return key


def test_in_a_turn_the_profiles_model_answers_an_upstream_sampling_and_nobody_answering_declines_an_elicitation():
    key = asking_server_in_turns()
    with ScriptedOpenAI() as model:
        # ask's elicitation waits for an operator for what is left of the call's 8 s, less 2 s for the server
        env = database_env(TOOLHUB_MODEL_BASE_URL=model.base_url, TOOLHUB_MODEL="scripted", TOOLHUB_MODEL_RETRIES="0",
                           TOOLHUB_WARM_START="0", TOOLHUB_MCP_SAMPLING_MAX_TOKENS="500",
                           TOOLHUB_MCP_TIMEOUT="8")  # fmt: skip
        with celery_worker(env, app), daphne(env) as base:
            client = openai.OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0, timeout=120)
            model.steps = [
                {"tool_calls": [{"name": "sample", "arguments": {"value": "Name a colour"}}]},
                {"content": "green"},  # the server's sampling request, answered by the turn's profile
                {"content": "Done."},
            ]
            client.chat.completions.create(model="toolhub", messages=[{"role": "user", "content": "Use sample"}])
            model.steps = [{"tool_calls": [{"name": "ask", "arguments": {"value": "Sure?"}}]}, {"content": "Done."}]
            client.chat.completions.create(model="toolhub", messages=[{"role": "user", "content": "Use ask"}])

    sampling = model.requests[1]
    assert (sampling["messages"], sampling["max_tokens"]) == ([{"role": "user", "content": "Name a colour"}], 500)
    assert "tools" not in sampling
    results = list(Message.objects.filter(role=Message.Role.TOOL).order_by("id").values_list("content", flat=True))
    assert results[0] == "sampled: green"
    assert results[1] == "action=decline content=null"
    question = ServerQuestion.objects.get()
    assert (question.status, question.message, question.answered_by) == ("expired", "Sure?", None)
    messages = [event.payload["message"] for event in TurnEvent.objects.filter(turn=question.turn, type="status")]
    assert "❓ Waiting for an answer from the operator: Sure?" in messages
    assert "⌛ No operator answered the server's question within the tool call's time: declined" in messages


def run_turn_answered_in_the_console(decision: dict) -> tuple[str, ServerQuestion, list[dict]]:
    """A /v1 turn (on a Celery worker) calls ask; an operator posts `decision` to the question in the console while
    the call waits. The tool's result, the question, and what the model was sent."""
    key = asking_server_in_turns()
    operator = Client()
    operator.force_login(make_user(username="answerer", role="operator"))
    with ScriptedOpenAI() as model:
        env = database_env(TOOLHUB_MODEL_BASE_URL=model.base_url, TOOLHUB_MODEL="scripted", TOOLHUB_MODEL_RETRIES="0",
                           TOOLHUB_WARM_START="0", TOOLHUB_MCP_TIMEOUT="60")  # fmt: skip
        with celery_worker(env, app), daphne(env) as base, concurrent.futures.ThreadPoolExecutor(1) as pool:
            client = openai.OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0, timeout=120)
            model.steps = [{"tool_calls": [{"name": "ask", "arguments": {"value": "Favourite colour?"}}]},
                           {"content": "Done."}]  # fmt: skip
            answer = pool.submit(client.chat.completions.create, model="toolhub",
                                 messages=[{"role": "user", "content": "Use ask"}])  # fmt: skip
            deadline = time.monotonic() + 60
            while (question := ServerQuestion.objects.filter(status="pending").first()) is None:
                assert time.monotonic() < deadline and not answer.done(), "the turn asked no question"
                time.sleep(0.2)
            shown = operator.get(f"/console/{question.turn.conversation_id}/").content.decode()
            assert "waiting for an answer from the operator" in shown and 'name="field-answer"' in shown
            posted = operator.post(f"/console/questions/{question.pk}/", decision, headers={"HX-Request": "true"})
            assert posted.status_code == 200, posted.content.decode()
            assert answer.result().choices[0].message.content == "Done."
    (result,) = Message.objects.filter(role=Message.Role.TOOL).values_list("content", flat=True)
    question.refresh_from_db()
    return result, question, model.requests


def test_in_a_turn_an_operator_answers_an_upstream_elicitation_in_the_console_and_the_tool_gets_it():
    result, question, requests = run_turn_answered_in_the_console({"decision": "answer", "field-answer": "teal"})
    assert result == 'action=accept content={"answer": "teal"}'
    assert (question.status, question.answer, question.answered_by.username) == ("answered", {"answer": "teal"},
                                                                                  "answerer")  # fmt: skip
    assert {"role": "tool", "tool_call_id": requests[1]["messages"][-1]["tool_call_id"], "content": result} == (
        requests[1]["messages"][-1])  # the model read the operator's answer in the tool's result  # fmt: skip
    messages = [event.payload["message"] for event in TurnEvent.objects.filter(turn=question.turn, type="status")]
    assert '💬 answerer answered the server\'s question: {"answer": "teal"}' in messages


def test_in_a_turn_an_operator_declines_an_upstream_elicitation_in_the_console():
    result, question, _ = run_turn_answered_in_the_console({"decision": "decline"})
    assert result == "action=decline content=null"
    assert (question.status, question.answer, question.answered_by.username) == ("declined", None, "answerer")
