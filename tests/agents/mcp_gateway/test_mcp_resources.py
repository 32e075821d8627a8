"""Resources, prompts, completion, logging and progress of upstream MCP servers through toolhub's /mcp (in-process).

The upstream servers are tests/support/generated_mcp_server.py with --library: real
stdio MCP programs serving resources, a template, prompts and completions.
"""

import asyncio
import sys

import mcp_types as types
import pytest
import pytest_asyncio
from asgiref.sync import sync_to_async
from django.db import connections

from agents.access.api_keys import create_api_key
from agents.mcp_gateway import resources as mcp_resources
from agents.mcp_gateway import subscriptions as mcp_subscriptions
from agents.mcp_gateway.server import McpEndpoint
from agents.models import ApiKey
from catalog.mcp_client import client as mcp_client
from catalog.mcp_client.sync import sync_server
from catalog.models import McpServer, Tool, ToolPolicy
from tests.support.builders import make_policy, make_tool, make_user
from tests.support.generated_mcp_server import PNG
from tests.support.mcp_asgi import McpAsgiClient

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


def library_server(name: str, library: str | None = None) -> McpServer:
    args = ["-m", "tests.support.generated_mcp_server", "--tools", "1", "--library", library or name]
    # Shared: a tool call (gen_add_note) and the resource lists then see the same process's notes.
    server = McpServer.objects.create(name=name, command=sys.executable, args=args,
                                      connection_scope=McpServer.ConnectionScope.SHARED)  # fmt: skip
    assert sync_server(server).ok
    return server


def allow(server: McpServer, tool: str = "gen_slow") -> ToolPolicy:
    """An active policy for one of the server's tools: its resources and prompts are offered from then on."""
    return make_policy(Tool.objects.get(name=next(name for name in server.tool_names if name.endswith(tool))))


@sync_to_async
def setup(*servers: tuple[str, bool], role: str = "operator", scopes=ApiKey.DEFAULT_SCOPES) -> str:
    """Servers (name, whether one of its tools is allowed) and an API key of `role` with `scopes`."""
    for name, allowed in servers:
        server = library_server(name)
        if allowed:
            allow(server)
    mcp_client.close_all()  # the endpoint opens its own connections, as Daphne would
    return create_api_key(user=make_user(role=role), name="resources", scopes=scopes)[1]


@pytest_asyncio.fixture
async def endpoint():
    endpoint = McpEndpoint()
    mcp_resources._lists.forget_all()
    yield endpoint
    if endpoint._runner is not None:
        endpoint._runner.cancel()
    mcp_resources._lists.forget_all()
    await sync_to_async(mcp_client.close_all)()
    await sync_to_async(connections.close_all)()


async def session(endpoint, key) -> McpAsgiClient:
    client = McpAsgiClient(endpoint, key)
    assert (await client.initialize()).status == 200
    return client


async def test_toolhub_advertises_resources_prompts_logging_and_completions(endpoint):
    key = await setup(("shelf", True))
    client = McpAsgiClient(endpoint, key)

    capabilities = (await client.initialize()).result["capabilities"]

    assert capabilities["resources"] == {"subscribe": True, "listChanged": True}
    assert capabilities["prompts"] == {"listChanged": True}
    assert {"logging", "completions", "tools"} <= set(capabilities)


async def test_an_allowed_servers_resources_and_templates_are_listed_and_read_by_their_own_uri(endpoint):
    client = await session(endpoint, await setup(("shelf", True)))

    listed = (await client.request("resources/list")).result["resources"]
    templates = (await client.request("resources/templates/list")).result["resourceTemplates"]
    readme = (await client.request("resources/read", {"uri": "gen://shelf/readme"})).result["contents"]
    pixel = (await client.request("resources/read", {"uri": "gen://shelf/pixel"})).result["contents"]
    note = (await client.request("resources/read", {"uri": "gen://shelf/notes/7"})).result["contents"]

    assert [(r["uri"], r["name"], r["mimeType"]) for r in listed] == [
        ("gen://shelf/readme", "readme", "text/markdown"), ("gen://shelf/pixel", "pixel", "image/png")]  # fmt: skip
    assert listed[0]["title"] == "shelf readme"
    assert templates == [{"uriTemplate": "gen://shelf/notes/{id}", "name": "note", "mimeType": "text/plain"}]
    assert readme == [{"uri": "gen://shelf/readme", "mimeType": "text/markdown", "text": "# The shelf readme"}]
    assert pixel == [{"uri": "gen://shelf/pixel", "mimeType": "image/png", "blob": PNG}]
    assert note[0]["text"] == "Note 7."  # through the template: never listed, routed by matching it


async def test_prompts_keep_their_servers_names_and_are_got_with_arguments(endpoint):
    client = await session(endpoint, await setup(("shelf", True)))

    prompts = (await client.request("prompts/list")).result["prompts"]
    got = await client.request("prompts/get", {"name": "summarize", "arguments": {"topic": "pears"}})
    greeting = await client.request("prompts/get", {"name": "shelf__greet"})  # the prefixed form is understood too
    missing = await client.request("prompts/get", {"name": "summarize"})

    assert [(p["name"], p.get("title")) for p in prompts] == [("summarize", "Summarize"), ("greet", None)]
    assert prompts[0]["arguments"] == [{"name": "topic", "description": "What to summarize", "required": True}]
    assert got.result["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "Summarize pears in the words of shelf."}}
    ]
    assert greeting.result["description"] == "greet of shelf"
    assert missing.error == {"code": -32602, "message": "MCP server 'shelf' refused: Prompt summarize needs a topic"}


async def test_a_denied_or_disabled_servers_resources_and_prompts_are_neither_listed_nor_read(endpoint):
    client = await session(endpoint, await setup(("open", True), ("closed", False)))

    uris = [r["uri"] for r in (await client.request("resources/list")).result["resources"]]
    prompts = [p["name"] for p in (await client.request("prompts/list")).result["prompts"]]
    templates = [
        t["uriTemplate"] for t in (await client.request("resources/templates/list")).result["resourceTemplates"]
    ]
    read = await client.request("resources/read", {"uri": "gen://closed/readme"})
    by_template = await client.request("resources/read", {"uri": "gen://closed/notes/1"})
    got = await client.request("prompts/get", {"name": "closed__greet"})

    assert uris == ["gen://open/readme", "gen://open/pixel"]
    assert prompts == ["summarize", "greet"] and templates == ["gen://open/notes/{id}"]
    assert read.error["code"] == -32602 and read.error["message"] == (
        "There is no resource gen://closed/readme among those toolhub offers: no MCP server whose tools policy "
        "allows lists it or has a resource template matching it."
    )
    assert by_template.error["code"] == -32602
    assert got.error["code"] == -32602 and got.error["message"].startswith("There is no prompt named closed__greet")

    await sync_to_async(McpServer.objects.filter(name="open").update)(enabled=False)
    assert (await client.request("resources/list")).result["resources"] == []
    assert (await client.request("prompts/list")).result["prompts"] == []


async def test_a_draft_policy_denies_like_none(endpoint):
    client = await session(endpoint, await setup(("shelf", True)))
    assert len((await client.request("resources/list")).result["resources"]) == 2

    await sync_to_async(ToolPolicy.objects.update)(status=ToolPolicy.Status.DRAFT)
    mcp_resources._lists.forget_all()

    assert (await client.request("resources/list")).result["resources"] == []


async def test_unknown_uris_and_prompt_names_are_json_rpc_errors(endpoint):
    client = await session(endpoint, await setup(("shelf", True)))

    unknown = await client.request("resources/read", {"uri": "file:///etc/passwd"})
    refused = await client.request("resources/read", {"uri": "gen://shelf/nothing"})  # no template matches
    unlisted = await client.request("prompts/get", {"name": "nope"})
    unlisted_prefixed = await client.request("prompts/get", {"name": "shelf__nope"})

    assert unknown.error["code"] == -32602 and "There is no resource file:///etc/passwd" in unknown.error["message"]
    assert refused.error["code"] == -32602
    assert unlisted.error["code"] == -32602 and unlisted.error["message"].startswith("There is no prompt named nope")
    assert unlisted_prefixed.error["code"] == -32602


async def test_a_uri_two_servers_list_is_listed_by_neither_and_reading_it_names_both(endpoint):
    @sync_to_async
    def twins():
        for name in ("left", "right"):
            allow(library_server(name, library="same"))
        mcp_client.close_all()
        return create_api_key(user=make_user(), name="twins")[1]

    client = await session(endpoint, await twins())

    listed = (await client.request("resources/list")).result["resources"]
    read = await client.request("resources/read", {"uri": "gen://same/readme"})
    prompts = [p["name"] for p in (await client.request("prompts/list")).result["prompts"]]
    left = await client.request("prompts/get", {"name": "left__greet"})
    right = await client.request("prompts/get", {"name": "right__greet"})

    assert listed == []
    assert read.error["code"] == -32602 and "more than one MCP server (left, right)" in read.error["message"]
    assert prompts == ["summarize", "greet", "right__summarize", "right__greet"]  # the later server's carry its prefix
    assert left.result["description"] == right.result["description"] == "greet of same"

    await sync_to_async(McpServer.objects.filter(name="left").update)(enabled=False)
    prompts = [p["name"] for p in (await client.request("prompts/list")).result["prompts"]]
    still = await client.request("prompts/get", {"name": "right__greet"})

    assert prompts == ["summarize", "greet"]  # no clash any more
    assert still.result["description"] == "greet of same"  # the name it was given still works


async def test_completion_is_relayed_for_a_prompt_argument_and_a_template_variable(endpoint):
    client = await session(endpoint, await setup(("shelf", True)))

    prompt = await client.request(
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "shelf__summarize"}, "argument": {"name": "topic", "value": "ap"}},
    )
    template = await client.request(
        "completion/complete",
        {"ref": {"type": "ref/resource", "uri": "gen://shelf/notes/{id}"}, "argument": {"name": "id", "value": "2"}},
    )
    unknown = await client.request("completion/complete", {
        "ref": {"type": "ref/prompt", "name": "nobody__x"}, "argument": {"name": "a", "value": ""}})  # fmt: skip

    assert prompt.result["completion"]["values"] == ["apples", "apricots"]
    assert template.result["completion"]["values"] == ["2"]
    assert unknown.error["code"] == -32602


@pytest.mark.parametrize("role, scopes", [("viewer", ApiKey.DEFAULT_SCOPES), ("operator", [ApiKey.Scope.READ])])
async def test_a_key_that_may_not_call_tools_lists_resources_but_may_not_read_get_or_subscribe(endpoint, role, scopes):
    client = await session(endpoint, await setup(("shelf", True), role=role, scopes=scopes))

    assert len((await client.request("resources/list")).result["resources"]) == 2
    read = await client.request("resources/read", {"uri": "gen://shelf/readme"})
    got = await client.request("prompts/get", {"name": "shelf__greet"})
    subscribed = await client.request("resources/subscribe", {"uri": "gen://shelf/readme"})

    assert read.status == 403 and read.error["code"] == -32003 and "call a tool" in read.error["message"]
    assert got.status == 403 and subscribed.status == 403


async def test_progress_and_log_messages_of_a_call_reach_the_caller_at_its_level(endpoint):
    client = await session(endpoint, await setup(("shelf", True)))
    set_level = await client.request("logging/setLevel", {"level": "info"})
    assert set_level.status == 200 and set_level.result == {}

    reply = await client.request("tools/call", {"name": "gen_slow", "arguments": {"steps": 3},
                                                "_meta": {"progressToken": "tok-1"}})  # fmt: skip

    progress = [m["params"] for m in reply.messages if m.get("method") == "notifications/progress"]
    logs = [m["params"] for m in reply.messages if m.get("method") == "notifications/message"]
    assert reply.result["content"][0]["text"] == "done in 3 steps"
    assert progress == [{"progressToken": "tok-1", "progress": step, "total": 3, "message": f"step {step} of 3"}
                        for step in (1, 2, 3)]  # fmt: skip
    assert logs == [{"level": "info", "logger": "shelf", "data": f"step {step}"} for step in (1, 2, 3)]
    assert "result" in reply.messages[-1]  # the notices came first

    await client.request("logging/setLevel", {"level": "error"})
    quiet = await client.request("tools/call", {"name": "gen_slow", "arguments": {"steps": 2}})
    assert [m for m in quiet.messages if "method" in m] == []  # no token: no progress; info is below error


async def test_an_upstream_resource_list_change_drops_the_cached_list_and_is_passed_on(endpoint):
    client = await session(endpoint, await setup(("shelf", True)))
    await sync_to_async(lambda: make_policy(Tool.objects.get(name="gen_add_note")))()
    assert len((await client.request("resources/list")).result["resources"]) == 2
    heard = []

    class Listening:
        async def send_notification(self, notification):
            heard.append(notification)

    mcp_resources._listeners.add("other-session", Listening(), mcp_resources.RESOURCES_CHANGED)

    added = await client.request("tools/call", {"name": "gen_add_note", "arguments": {"id": "n1"}})
    assert added.result["content"][0]["text"] == "gen://shelf/added/n1"
    for _ in range(100):
        if heard:
            break
        await asyncio.sleep(0.05)

    assert [type(n) for n in heard] == [types.ResourceListChangedNotification]
    listed = [r["uri"] for r in (await client.request("resources/list")).result["resources"]]
    assert listed == ["gen://shelf/readme", "gen://shelf/pixel", "gen://shelf/added/n1"]  # not the cached list
    read = await client.request("resources/read", {"uri": "gen://shelf/added/n1"})
    assert read.result["contents"][0]["text"] == "Added note n1."


async def test_a_server_that_cannot_be_reached_is_left_out_and_the_others_still_listed(endpoint):
    @sync_to_async
    def with_a_ghost():
        McpServer.objects.create(name="ghost", command="/nonexistent/ghost-server", tool_names=["ghost_tool"])
        make_policy(make_tool("ghost_tool", source=Tool.Source.MCP, is_mcp=True))

    key = await setup(("shelf", True))
    await with_a_ghost()
    client = await session(endpoint, key)

    uris = [r["uri"] for r in (await client.request("resources/list")).result["resources"]]
    prompts = [p["name"] for p in (await client.request("prompts/list")).result["prompts"]]
    read = await client.request("resources/read", {"uri": "gen://ghost/readme"})

    assert uris == ["gen://shelf/readme", "gen://shelf/pixel"]
    assert prompts == ["summarize", "greet"]
    assert read.error["code"] == -32602  # nobody reachable lists it


async def test_subscribing_to_a_resource_of_a_server_without_subscriptions_or_of_none_is_a_json_rpc_error(endpoint):
    client = await session(endpoint, await setup(("shelf", True), ("closed", False)))

    unsupported = await client.request("resources/subscribe", {"uri": "gen://shelf/readme"})
    denied = await client.request("resources/subscribe", {"uri": "gen://closed/readme"})
    nothing = await client.request("resources/unsubscribe", {"uri": "gen://shelf/readme"})

    assert unsupported.error == {"code": -32602, "message": "MCP server 'shelf', which serves gen://shelf/readme, "
                                 "offers no subscriptions to its resources."}  # fmt: skip
    assert denied.error["code"] == -32602 and denied.error["message"].startswith("There is no resource gen://closed")
    assert nothing.result == {}  # nothing to undo
    assert mcp_subscriptions._subscriptions.sessions == {}


@pytest.fixture
def upstream_subscriptions(monkeypatch) -> list[tuple[str, str, str]]:
    """What toolhub asks the servers, (subscribe or unsubscribe, server, URI), instead of asking them."""
    asked = []

    async def subscribe(server, uri):
        asked.append(("subscribe", server.name, uri))
        return True

    async def unsubscribe(server, uri):
        asked.append(("unsubscribe", server.name, uri))

    monkeypatch.setattr(mcp_subscriptions, "asubscribe", subscribe)
    monkeypatch.setattr(mcp_subscriptions, "aunsubscribe", unsubscribe)
    monkeypatch.setattr(mcp_subscriptions, "_subscriptions", mcp_subscriptions._Subscriptions())
    return asked


async def test_the_server_is_unsubscribed_when_the_last_session_of_a_uri_unsubscribes(endpoint, upstream_subscriptions):
    asked = upstream_subscriptions
    key = await setup(("shelf", True))
    first, second = await session(endpoint, key), await session(endpoint, key)

    for client in (first, second):
        assert (await client.request("resources/subscribe", {"uri": "gen://shelf/readme"})).result == {}
    await first.request("resources/unsubscribe", {"uri": "gen://shelf/readme"})
    kept = {key: dict(sessions) for key, sessions in mcp_subscriptions._subscriptions.sessions.items()}
    await second.request("resources/unsubscribe", {"uri": "gen://shelf/readme"})

    assert asked == [("subscribe", "shelf", "gen://shelf/readme")] * 2 + [
        ("unsubscribe", "shelf", "gen://shelf/readme")
    ]
    assert list(kept) == [("shelf", "gen://shelf/readme")] and len(kept[("shelf", "gen://shelf/readme")]) == 1
    assert mcp_subscriptions._subscriptions.sessions == {}


async def test_past_the_most_subscriptions_the_oldest_is_dropped_and_its_server_told(
    endpoint, upstream_subscriptions, monkeypatch
):
    monkeypatch.setattr(mcp_subscriptions, "MAX_SUBSCRIPTIONS", 1)
    client = await session(endpoint, await setup(("shelf", True)))

    for uri in ("gen://shelf/readme", "gen://shelf/pixel"):
        assert (await client.request("resources/subscribe", {"uri": uri})).result == {}

    assert upstream_subscriptions == [("subscribe", "shelf", "gen://shelf/readme"),
                                      ("subscribe", "shelf", "gen://shelf/pixel"),
                                      ("unsubscribe", "shelf", "gen://shelf/readme")]  # fmt: skip
    assert list(mcp_subscriptions._subscriptions.sessions) == [("shelf", "gen://shelf/pixel")]
