"""What toolhub's MCP server lists and runs for an API key (the logic under /mcp, without HTTP)."""

import asyncio
import datetime
import json
import sys

import pytest
import pytest_asyncio
from asgiref.sync import sync_to_async
from django.utils import timezone

from agents.access.api_keys import create_api_key
from agents.mcp_gateway.found_tools import found_tools, remember_found
from agents.mcp_gateway.server import (
    DEFAULT_RESULT_TOKENS,
    NEUTRAL,
    ApprovalNeeded,
    McpEndpoint,
    ToolRefused,
    call,
    call_result,
    path_router,
    result_token_limit,
    session_tools,
)
from agents.models import McpFoundTool, ModelProfile
from agents.turns.tool_calls import CallOutcome
from catalog.mcp_client.content import wire_result
from catalog.models import ToolPolicy
from catalog.policies.decision import RoutingDecision
from catalog.search.service import one_catalog_state
from tests.support.builders import make_policy, make_tool, make_user
from tests.support.mcp_asgi import McpAsgiClient

pytestmark = pytest.mark.django_db

SEARCH_SCHEMA = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
CREATING = RoutingDecision(action="create", domains=frozenset({"general"}), confidence=1.0)


@pytest.fixture
def catalog():
    make_policy(make_tool("tool_search", input_schema=SEARCH_SCHEMA, always_load=True), operation="search")
    make_policy(make_tool("calculate", input_schema={"type": "object", "properties": {}}, always_load=True))
    make_policy(make_tool("lookup_thing", should_defer=True))
    make_policy(make_tool("make_thing", should_defer=True), operation="create")
    make_policy(make_tool("read_secret", should_defer=False), requires_confirmation=True)
    make_tool("unpolicied_thing", should_defer=False)


@pytest.fixture
def key():
    api_key, _ = create_api_key(user=make_user(username="client", role="viewer"), name="mcp")
    return api_key.pk


def listed(key_id) -> set[str]:
    return {tool.name for tool in session_tools(found_tools(key_id))}


def refusal(name, arguments, key_id) -> str:
    with pytest.raises(ToolRefused) as refused:
        call(name, arguments, key_id)
    return str(refused.value)


def not_connected(outcome) -> bool:
    """The call got past policy: these test tools have no MCP server to run on."""
    return outcome.is_error and "not connected to" in json.loads(outcome.content)["error"]


def test_a_new_session_lists_the_search_tool_and_the_loaded_tools_only(catalog, key):
    assert listed(key) == {"tool_search", "calculate", "read_secret"}


def test_a_tool_policy_permits_is_callable_by_name_without_a_search(catalog, key):
    assert "lookup_thing" not in listed(key)  # deferred: not in the list (context) ...
    assert not_connected(call("lookup_thing", {"q": "x"}, key))  # ... but permitted (policy)


def test_what_a_key_found_stays_listed_for_that_key_only_across_sessions(catalog, key):
    other_key = create_api_key(user=make_user(username="other", role="viewer"), name="other")[0].pk
    assert "make_thing" not in listed(key)

    remember_found(key, ["make_thing"], CREATING)  # what tool_search does with what it found

    assert "make_thing" in listed(key) and "make_thing" not in listed(other_key)
    # Listing is context, not permission: policy lets both keys call it by name (test_mcp_direct_calls).
    assert not_connected(call("make_thing", {"q": "x"}, key))
    assert not_connected(call("make_thing", {"q": "x"}, other_key))


def test_what_a_key_found_is_forgotten_after_the_configured_time(catalog, key, settings):
    settings.TOOLHUB_MCP_FOUND_TTL = 60
    remember_found(key, ["make_thing"], CREATING)
    row = McpFoundTool.objects.get()
    assert (
        timezone.now() + datetime.timedelta(seconds=55)
        < row.expires_at
        <= timezone.now() + datetime.timedelta(seconds=60)
    )
    McpFoundTool.objects.update(expires_at=timezone.now() - datetime.timedelta(seconds=1))

    assert "make_thing" not in listed(key)
    remember_found(key, [], CREATING)
    assert not McpFoundTool.objects.exists()  # expired rows go with the next search


def test_a_found_tool_whose_policy_is_no_longer_active_drops_out(catalog, key):
    remember_found(key, ["make_thing"], CREATING)
    policy = ToolPolicy.objects.get(tool__name="make_thing")
    policy.status = ToolPolicy.Status.DRAFT
    policy.save()

    assert "make_thing" not in listed(key)
    assert "no active policy: its policy is draft" in refusal("make_thing", {"q": "x"}, key)


def test_unknown_and_unpolicied_tools_are_refused_and_approval_tools_ask_for_approval(catalog, key):
    remember_found(key, ["unpolicied_thing"], NEUTRAL)

    assert "unpolicied_thing" not in listed(key)
    assert "no active policy: it has no policy (fail closed)" in refusal("unpolicied_thing", {"q": "x"}, key)
    assert refusal("nope", {}, key) == "There is no tool named nope."
    with pytest.raises(ApprovalNeeded) as needed:
        call("read_secret", {"q": "x"}, key)
    assert "read_secret needs approval" in str(needed.value)


def test_arguments_that_do_not_match_the_schema_are_an_error_result_the_model_can_correct(catalog, key):
    missing = call("read_secret", {}, key)
    assert missing.is_error and "Missing required arguments: q" in json.loads(missing.content)["error"]
    wrong = call("lookup_thing", {"q": 5}, key)
    assert json.loads(wrong.content)["error"] == "Invalid arguments at q: 5 is not of type 'string'"


def test_an_mcp_result_passes_on_whole_with_only_its_text_cut_to_the_budget():
    image = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png", "annotations": {"priority": 1}}
    link = {"type": "resource_link", "uri": "gen://x", "name": "x"}
    text = {"type": "text", "text": "word " * 5000, "annotations": {"audience": ["user"]}}
    whole = wire_result([text, image, link], {"n": 1}, False)

    result = call_result(CallOutcome(content="(the model's view)", result=whole), 100)

    wire = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert wire["content"][1:] == [image, link] and wire["structuredContent"] == {"n": 1}
    assert wire["content"][0]["annotations"] == {"audience": ["user"]}
    assert wire["content"][0]["text"].endswith("chars]") and len(wire["content"][0]["text"]) < 1000


def test_the_result_budget_is_the_profiles_read_once_while_the_catalog_state_stays(settings, django_assert_num_queries):
    settings.TOOLHUB_MODEL_PROFILE = "mcp-budget"
    assert result_token_limit() == DEFAULT_RESULT_TOKENS  # no such profile
    profile = ModelProfile.objects.create(name="mcp-budget", context_window=8192, max_output_tokens=512,
                                          reserved_result_tokens=300)  # fmt: skip
    assert result_token_limit() == 300
    with one_catalog_state(), django_assert_num_queries(0):
        assert result_token_limit() == 300
    profile.reserved_result_tokens = 50
    profile.save()
    assert result_token_limit() == 50


# --- the ASGI endpoint (no Daphne) -------------------------------------------------------------


async def asgi_request(app, path="/mcp", headers=()):
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": path, "headers": list(headers), "query_string": b""}
    await app(scope, receive, send)
    return sent[0]["status"] if sent else None, dict(sent[0].get("headers", [])) if sent else {}


@pytest.mark.asyncio
async def test_mcp_endpoint_refuses_a_request_without_a_valid_key_or_from_another_host(settings):
    settings.ALLOWED_HOSTS = ["toolhub.example"]
    endpoint = McpEndpoint()
    host = (b"host", b"toolhub.example")

    assert (await asgi_request(endpoint, headers=[host]))[0] == 401
    status, headers = await asgi_request(endpoint, headers=[host, (b"authorization", b"Bearer th_abc_def")])
    challenge = headers[b"www-authenticate"].decode()
    assert status == 401 and challenge.startswith('Bearer error="invalid_token"')
    assert 'resource_metadata="http://toolhub.example/.well-known/oauth-protected-resource/mcp"' in challenge
    assert (await asgi_request(endpoint, headers=[(b"host", b"evil.example")]))[0] == 400


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_get_stream_opens_with_its_headers_and_a_comment_before_any_server_message(mcp_endpoint):
    """Daphne writes headers with the first body bytes: without the comment, clients waited for the 15 s ping."""
    key = await sync_to_async(lambda: create_api_key(user=make_user("ops"), name="test")[1])()
    client = McpAsgiClient(mcp_endpoint, key)
    assert (await client.initialize()).status == 200
    sent, opened, requested = [], asyncio.Event(), []

    async def receive():
        if not requested:
            requested.append(True)
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.Event().wait()  # then the client stays connected

    async def send(message):
        sent.append(message)
        if message["type"] == "http.response.body":
            opened.set()

    headers = [(k.encode(), v.encode()) for k, v in {**client.headers(), "accept": "text/event-stream"}.items()]
    scope = {"type": "http", "http_version": "1.1", "method": "GET", "path": "/mcp", "raw_path": b"/mcp",
             "headers": headers, "query_string": b"", "scheme": "http", "server": ("127.0.0.1", 80),
             "client": ("127.0.0.1", 1234)}  # fmt: skip
    stream = asyncio.ensure_future(mcp_endpoint(scope, receive, send))
    try:
        await asyncio.wait_for(opened.wait(), timeout=10)  # the SDK's first ping would come at 15 s
    finally:
        stream.cancel()
    start, first = sent[0], sent[1]
    assert start["type"] == "http.response.start" and start["status"] == 200
    assert dict(start["headers"])[b"content-type"].startswith(b"text/event-stream")
    assert first["body"].startswith(b":") and first["more_body"]  # an SSE comment, not an event


@pytest.mark.asyncio
async def test_only_the_mcp_path_goes_to_the_mcp_app():
    calls = []

    def recorder(label):
        async def app(scope, receive, send):
            calls.append((label, scope["path"]))

        return app

    route = path_router(recorder("django"), recorder("mcp"), path="/mcp")
    for path in ("/mcp", "/mcp/", "/mcp-servers/", "/mcp-servers/loyalty/", "/catalog/"):
        await route({"type": "http", "path": path}, None, None)

    assert calls == [("mcp", "/mcp"), ("mcp", "/mcp/"), ("django", "/mcp-servers/"),
                     ("django", "/mcp-servers/loyalty/"), ("django", "/catalog/")]  # fmt: skip


@pytest.fixture
def more_policies(catalog):
    make_policy(make_tool("rejected_thing", should_defer=True), status=ToolPolicy.Status.REJECTED)
    make_policy(make_tool("risky_unconfirmed", should_defer=True), risk="high")
    make_policy(make_tool("phase_step", should_defer=True), workflow_phases=["draft"])
    make_policy(make_tool("draft_thing", should_defer=True), status=ToolPolicy.Status.DRAFT)


def test_a_key_for_clients_that_never_search_lists_every_tool_it_may_call(more_policies, key):
    # Denied, draft, unconfirmed high-risk, phase-bound and unpolicied tools stay out, as from a direct call.
    assert {t.name for t in session_tools({}, every_permitted=True)} == {
        "tool_search", "calculate", "read_secret", "lookup_thing", "make_thing"
    }  # fmt: skip


def test_listing_every_tool_stops_at_the_token_budget_and_the_rest_stay_callable(more_policies, key, settings):
    neutral = sum(tool.schema_tokens for tool in session_tools({}))
    extra = {t.name: t.schema_tokens for t in session_tools({}, every_permitted=True)}
    settings.TOOLHUB_MCP_LIST_ALL_TOKENS = neutral + extra["lookup_thing"]  # room for one more, by name
    assert {t.name for t in session_tools({}, every_permitted=True)} - listed(key) == {"lookup_thing"}
    settings.TOOLHUB_MCP_LIST_ALL_TOKENS = 0  # the always-loaded tools are listed whatever the budget
    assert {t.name for t in session_tools({}, every_permitted=True)} == listed(key)
    assert not_connected(call("make_thing", {"q": "x"}, key))  # over the budget: still permitted by name


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_tools_list_of_a_list_every_tool_key_carries_a_deferred_tools_output_schema(mcp_endpoint):
    output = {"type": "object", "properties": {"count": {"type": "integer"}}}

    def prepare() -> tuple[str, str]:
        make_policy(make_tool("count_things", should_defer=True, output_schema=output))
        user = make_user("client", role="viewer")
        return create_api_key(user=user, name="lists all", list_every_tool=True)[1], create_api_key(
            user=user, name="searches"
        )[1]

    every, searching = await sync_to_async(prepare)()
    tools = {}
    for name, key in (("every", every), ("searching", searching)):
        client = McpAsgiClient(mcp_endpoint, key)
        assert (await client.initialize()).status == 200
        tools[name] = {tool["name"]: tool for tool in (await client.list_tools()).result["tools"]}
    assert tools["every"]["count_things"]["outputSchema"] == output and "count_things" not in tools["searching"]


@sync_to_async
def generated_server_and_key() -> str:
    """A real stdio MCP server with one tool (gen_tool_0001: echoes its arguments), allowed by an active policy, and
    an operator's key."""
    from catalog.mcp_client import client as mcp_client
    from catalog.mcp_client.sync import sync_server
    from catalog.models import McpServer, Tool

    server = McpServer.objects.create(name="gen", command=sys.executable,
                                      args=["-m", "tests.support.generated_mcp_server", "--tools", "1"])  # fmt: skip
    assert sync_server(server).ok
    make_policy(Tool.objects.get(name="gen_tool_0001"))
    mcp_client.close_all()  # the endpoint opens its own connection, as Daphne would
    return create_api_key(user=make_user(username="caller", role="operator"), name="gen")[1]


@pytest_asyncio.fixture
async def gen_session(mcp_endpoint, monkeypatch):
    """(an initialized /mcp session of an operator's key over the generated server, the names of the functions /mcp
    runs in the database's worker threads from then on, in order)."""
    from agents.mcp_gateway import server as mcp_server
    from catalog.mcp_client import client as mcp_client

    client = McpAsgiClient(mcp_endpoint, await generated_server_and_key())
    assert (await client.initialize()).status == 200
    hops, real = [], mcp_server.database_sync_to_async

    def counted(function, *args, **kwargs):
        hops.append(getattr(function, "__name__", repr(function)))
        return real(function, *args, **kwargs)

    monkeypatch.setattr(mcp_server, "database_sync_to_async", counted)
    yield client, hops
    await sync_to_async(mcp_client.close_all)()


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_permitted_mcp_call_reads_the_database_in_the_admission_hop_only(gen_session):
    client, hops = gen_session

    reply = await client.call_tool("gen_tool_0001", {"q": "ada", "limit": 2})

    assert reply.status == 200 and not reply.result["isError"]
    assert json.loads(reply.result["content"][0]["text"]) == {
        "tool": "gen_tool_0001",
        "arguments": {"q": "ada", "limit": 2},
    }
    assert hops == ["_admit"]  # the policy, the schema, the server's row and the budget: read with the bearer


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_call_the_plan_does_not_cover_is_decided_as_before_with_its_error(gen_session):
    client, hops = gen_session

    wrong = await client.call_tool("gen_tool_0001", {"q": "ada", "limit": 0})  # below the schema's minimum
    unknown = await client.call_tool("gen_tool_9999", {"q": "ada"})

    assert wrong.result["isError"] and "Invalid arguments at limit" in wrong.result["content"][0]["text"]
    assert unknown.error["message"] == "There is no tool named gen_tool_9999."
    assert hops == ["_admit", "run", "_admit", "run"]  # planned: nothing; `call` decided each, in a hop of its own
