"""What toolhub's MCP server lists and runs per session (the logic under /mcp, without HTTP)."""

import json
import time

import pytest

from agents.mcp_server import NEUTRAL, McpEndpoint, Sessions, call, path_router, session_tools
from catalog.decision import RoutingDecision
from catalog.models import ToolPolicy
from tests.builders import make_policy, make_tool

pytestmark = pytest.mark.django_db

SEARCH_SCHEMA = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
LISTING = RoutingDecision(action="list", domains=frozenset({"general"}), confidence=0.9)


@pytest.fixture
def catalog():
    make_policy(make_tool("tool_search", input_schema=SEARCH_SCHEMA, always_load=True), operation="search")
    make_policy(make_tool("calculate", input_schema={"type": "object", "properties": {}}, always_load=True))
    make_policy(make_tool("lookup_thing", should_defer=True))
    make_policy(make_tool("read_secret", should_defer=False), requires_confirmation=True)
    make_tool("unpolicied_thing", should_defer=False)


def listed(found=None) -> set[str]:
    return {tool.name for tool in session_tools(found or {})}


def outcome_error(outcome) -> str:
    assert outcome.is_error
    return json.loads(outcome.content)["error"]


def test_a_new_session_lists_the_search_tool_and_the_loaded_tools_only(catalog):
    assert listed() == {"tool_search", "calculate", "read_secret"}


def test_a_found_tool_is_listed_and_callable_in_that_session_only(catalog):
    found = {"lookup_thing": LISTING}

    assert "lookup_thing" in listed(found)
    assert "deferred" in outcome_error(call("lookup_thing", {"q": "x"}, {}))
    outcome = call("lookup_thing", {"q": "x"}, found)
    assert "runs on an MCP server that this toolhub is not connected to" in outcome_error(outcome)  # it got past policy


def test_a_found_tool_whose_policy_is_no_longer_active_drops_out(catalog):
    found = {"lookup_thing": LISTING}
    assert "lookup_thing" in listed(found)
    policy = ToolPolicy.objects.get(tool__name="lookup_thing")
    policy.status = ToolPolicy.Status.DRAFT
    policy.save()

    assert "lookup_thing" not in listed(found)
    assert "policy is draft" in outcome_error(call("lookup_thing", {"q": "x"}, found))


def test_an_unpolicied_tool_is_never_listed_or_run_even_if_a_session_claims_it(catalog):
    found = {"unpolicied_thing": NEUTRAL}

    assert "unpolicied_thing" not in listed(found)
    assert "no policy (fail closed)" in outcome_error(call("unpolicied_thing", {"q": "x"}, found))


def test_a_tool_that_requires_approval_is_refused_with_a_clear_message(catalog):
    message = outcome_error(call("read_secret", {"q": "x"}, {}))

    assert "requires an operator's approval" in message and "not offered over MCP" in message


def test_arguments_are_checked_against_the_schema(catalog):
    assert "Missing required arguments: q" in outcome_error(call("read_secret", {}, {}))
    assert outcome_error(call("read_secret", {"q": 5}, {})) == "Invalid arguments at q: 5 is not of type 'string'"


def test_sessions_keep_their_own_tools_and_forget_idle_ones():
    sessions = Sessions(idle_seconds=0.05)
    sessions.get("a").found["lookup_thing"] = LISTING

    assert sessions.get("a").found == {"lookup_thing": LISTING}
    assert sessions.get("b").found == {}
    assert sessions.get(None).found == {}
    time.sleep(0.1)
    assert sessions.get("a").found == {}


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
    assert status == 401 and headers[b"www-authenticate"] == b"Bearer"
    assert (await asgi_request(endpoint, headers=[(b"host", b"evil.example")]))[0] == 400


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
