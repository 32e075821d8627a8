"""Real third-party MCP servers through toolhub's /mcp on Daphne, driven by the official MCP SDK client.

`mcp-server-time` (PyPI, pinned in requirements/dev.txt) runs over stdio next to
the builtin clock tools: its get_current_time clashes with the builtin one and
is named with the server's prefix. `@modelcontextprotocol/server-everything`
(npm, pinned in tests/npm/package-lock.json, installed by `make test`) answers
every kind of content; each answer through toolhub is compared with the same
call made directly to a second copy of the server. It has no audio tool, so
audio is covered by tests/agents/turns/test_mcp_content.py's generated server. Its
resources, resource templates, prompts, completions and progress pass through
toolhub the same way (tests/agents/mcp_gateway/test_mcp_resources.py covers the rule in detail),
and so do subscriptions to its resources and the updates it sends for them.
"""

import asyncio
import base64
import json
import re
import sys
from contextlib import asynccontextmanager

import httpx2
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, PromptReference, ResourceListChangedNotification, ResourceUpdatedNotification

from agents.access.api_keys import create_api_key
from catalog.mcp_client import client as mcp_client
from catalog.mcp_client.sync import sync_server
from catalog.models import McpServer, Tool
from demo.catalog import load_demo_catalog
from tests.support.builders import make_policy, make_user
from tests.support.servers import ROOT, daphne, database_env

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

EVERYTHING = ROOT / "tests/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
TIME_ARGS = ["-m", "mcp_server_time", "--local-timezone", "UTC"]
# Tools of server-everything the tests call; the others stay without a policy (denied).
EVERYTHING_CALLS = {
    "echo": {"message": "hello through toolhub"},
    "get-sum": {"a": 2, "b": 40},
    "get-tiny-image": {},
    "get-annotated-message": {"messageType": "error", "includeImage": True},
    "get-resource-links": {"count": 3},
    "get-resource-reference": {"resourceType": "Text", "resourceId": 2},
    "get-structured-content": {"location": "New York"},
}


def wire(result) -> dict:
    # `execution` is about tasks (SEP-1686), which toolhub does not offer; `_meta` is the transport's.
    return result.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"meta", "execution"})


# server-everything's dynamic resources say when they were made, to the second ("created at 7:28:01 AM"): a call made
# directly and the same call through toolhub a few ms later straddle a second now and then, and differed only there.
CREATED_AT = re.compile(r"created at [0-9:]+(?:(?:\s|\\u202f)?[AP]M)?")


def comparable(result) -> dict:
    """`wire(result)` with the clock time in server-everything's dynamic resources left out."""
    return json.loads(CREATED_AT.sub("created at <time>", json.dumps(wire(result))))


@pytest.fixture
def toolhub(tmp_path):
    """Daphne on the test database: the demo catalog, both servers synced, their read tools policied, a key."""
    assert EVERYTHING.exists(), "server-everything is not installed: run `make test-servers` (make test does)"
    load_demo_catalog()
    time_server = McpServer.objects.create(name="time", command=sys.executable, args=TIME_ARGS)
    # Shared: its resources, prompts and subscriptions go through the shared connection, and a tool call
    # (toggle-subscriber-updates) must reach the same process (docs/mcp.md, "Whose connection a call uses").
    everything = McpServer.objects.create(name="everything", command="node", args=[str(EVERYTHING), "stdio"],
                                          connection_scope=McpServer.ConnectionScope.SHARED)  # fmt: skip
    synced = {server.name: sync_server(server) for server in (time_server, everything)}
    assert all(result.ok for result in synced.values()), {name: r.error for name, r in synced.items()}
    for name in ["time__get_current_time", "convert_time", *EVERYTHING_CALLS]:
        make_policy(Tool.objects.get(name=name))
    Tool.objects.filter(name__in=["time__get_current_time", "convert_time"]).update(always_load=True)
    mcp_client.close_all()  # Daphne opens its own connections
    _, key = create_api_key(user=make_user(role="operator"), name="third-party")
    _, other_key = create_api_key(user=make_user(username="other", role="operator"), name="other")
    with daphne(database_env()) as base:
        yield base, key, other_key, synced


@asynccontextmanager
async def session_for(base: str, key: str, notices: list | None = None):
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=120)

    async def on_message(message):
        if notices is not None:
            notices.append(message)

    async with http, streamable_http_client(f"{base}/mcp", http_client=http) as (read, write):
        async with ClientSession(read, write, message_handler=on_message) as session:
            await session.initialize()
            yield session


@asynccontextmanager
async def direct_everything():
    params = StdioServerParameters(command="node", args=[str(EVERYTHING), "stdio"])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def test_mcp_server_time_imports_next_to_the_builtin_clock_and_its_structured_answers_pass_through(toolhub):
    base, key, _, synced = toolhub
    assert synced["time"].prefixed == {"time__get_current_time": "the builtin tool is named get_current_time"}
    assert Tool.objects.get(name="get_current_time").source == Tool.Source.BUILTIN

    async def scenario():
        async with session_for(base, key) as session:
            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            assert {"get_current_time", "time__get_current_time", "convert_time"} <= set(tools)
            listed = tools["time__get_current_time"]
            assert listed.output_schema["properties"]["timezone"] == {"title": "Timezone", "type": "string"}
            assert listed.annotations.read_only_hint is True
            assert tools["get_current_time"].output_schema is None  # the builtin one, unchanged

            upstream = await session.call_tool("time__get_current_time", {"timezone": "Asia/Ho_Chi_Minh"})
            assert not upstream.is_error, upstream.content
            assert upstream.structured_content["timezone"] == "Asia/Ho_Chi_Minh"  # the SDK checked outputSchema
            converted = await session.call_tool(
                "convert_time", {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}
            )
            assert converted.structured_content["target"]["datetime"].endswith("21:00:00+09:00")
            builtin = await session.call_tool("get_current_time", {"timezone": "Asia/Ho_Chi_Minh"})
            assert not builtin.is_error and builtin.structured_content is None  # toolhub's own clock

    asyncio.run(scenario())


def test_every_kind_of_content_of_server_everything_passes_through_unchanged(toolhub):
    base, key, _, _ = toolhub

    async def scenario():
        async with session_for(base, key) as through, direct_everything() as direct:
            direct_tools = {tool.name: tool for tool in (await direct.list_tools()).tools}
            query = "select:" + ",".join(EVERYTHING_CALLS)
            found = await through.call_tool("tool_search", {"query": query, "limit": 10})
            assert not found.is_error, found.content
            listed = {tool.name: tool for tool in (await through.list_tools()).tools}
            kinds = set()
            for name, arguments in EVERYTHING_CALLS.items():
                assert wire(listed[name]) == wire(direct_tools[name]), name  # title, schemas, annotations
                expected, got = await direct.call_tool(name, arguments), await through.call_tool(name, arguments)
                assert comparable(got) == comparable(expected), (name, wire(got), wire(expected))
                kinds |= {block.type for block in got.content}
            assert kinds == {"text", "image", "resource_link", "resource"}
            structured = await through.call_tool("get-structured-content", {"location": "Chicago"})
            assert set(structured.structured_content) == {"temperature", "conditions", "humidity"}

    asyncio.run(scenario())


def test_a_stateless_client_calls_what_its_key_found_in_another_session_and_any_permitted_tool_by_name(toolhub):
    base, key, other_key, _ = toolhub

    async def scenario():
        async with session_for(base, key) as first:
            assert "get-sum" not in {tool.name for tool in (await first.list_tools()).tools}  # deferred
            await first.call_tool("tool_search", {"query": "select:get-sum"})
        async with session_for(base, key) as second:  # a new session, as a stateless client opens per call
            assert "get-sum" in {tool.name for tool in (await second.list_tools()).tools}
            summed = await second.call_tool("get-sum", {"a": 1, "b": 2})
            assert "3" in summed.content[0].text
        async with session_for(base, other_key) as stranger:
            assert "get-sum" not in {tool.name for tool in (await stranger.list_tools()).tools}
            echoed = await stranger.call_tool("echo", {"message": "direct"})  # permitted, never searched for
            assert echoed.content[0].text == "Echo: direct"

    asyncio.run(scenario())


def test_unknown_and_denied_tools_are_json_rpc_errors_with_the_reason(toolhub):
    base, key, _, _ = toolhub

    async def scenario():
        async with session_for(base, key) as session:
            with pytest.raises(MCPError) as unknown:
                await session.call_tool("no-such-tool", {})
            with pytest.raises(MCPError) as denied:
                await session.call_tool("get-env", {})  # imported, never given a policy
            invalid = await session.call_tool("get-sum", {"a": "two", "b": 2})
            return unknown.value.error, denied.value.error, invalid

    unknown, denied, invalid = asyncio.run(scenario())

    assert (unknown.code, unknown.message) == (-32602, "There is no tool named no-such-tool.")
    assert denied.code == -32602 and "no policy (fail closed)" in denied.message
    assert invalid.is_error and "Invalid arguments at a" in invalid.content[0].text  # the model can correct this


def test_resources_prompts_completion_and_progress_of_server_everything_pass_through_and_a_denied_copys_stay_hidden(
    toolhub,
):
    base, key, _, _ = toolhub
    denied = McpServer.objects.create(name="everything-denied", command="node", args=[str(EVERYTHING), "stdio"])
    assert sync_server(denied).ok  # its tools are prefixed (the first copy has their names) and have no policy
    for name in ("trigger-long-running-operation", "gzip-file-as-resource"):
        make_policy(Tool.objects.get(name=name))
    mcp_client.close_all()
    prefix, denied_prefix = McpServer.objects.get(name="everything").prefix, denied.prefix

    async def scenario():
        notices = []
        async with session_for(base, key, notices) as through, direct_everything() as direct:
            resources = (await through.list_resources()).resources
            assert [wire(r) for r in resources] == [wire(r) for r in (await direct.list_resources()).resources]
            templates = (await through.list_resource_templates()).resource_templates
            assert [t.uri_template for t in templates] == ["demo://resource/dynamic/text/{resourceId}",
                                                           "demo://resource/dynamic/blob/{resourceId}"]  # fmt: skip
            document = resources[0].uri
            assert wire(await through.read_resource(document)) == wire(await direct.read_resource(document))
            dynamic = await through.read_resource("demo://resource/dynamic/text/3")  # routed by its template
            assert dynamic.contents[0].text.startswith("Resource 3: This is a plaintext resource")

            prompts = {p.name: p for p in (await through.list_prompts()).prompts}
            direct_prompts = (await direct.list_prompts()).prompts
            assert set(prompts) == {p.name for p in direct_prompts}  # their own names; none of the denied copy
            assert not any(name.startswith(f"{denied_prefix}__") for name in prompts)
            got = await through.get_prompt("args-prompt", {"city": "Hanoi", "state": "HN"})
            assert wire(got) == wire(await direct.get_prompt("args-prompt", {"city": "Hanoi", "state": "HN"}))
            completed = await through.complete(
                PromptReference(type="ref/prompt", name=f"{prefix}__completable-prompt"),  # the prefixed form works too
                {"name": "department", "value": "E"},
            )
            expected = await direct.complete(
                PromptReference(type="ref/prompt", name="completable-prompt"), {"name": "department", "value": "E"}
            )
            assert completed.completion.values == expected.completion.values and completed.completion.values

            with pytest.raises(MCPError) as unknown:
                await through.read_resource("demo://resource/nowhere/1")
            assert unknown.value.error.code == INVALID_PARAMS and "There is no resource" in unknown.value.error.message
            with pytest.raises(MCPError) as denied_prompt:
                await through.get_prompt(f"{denied_prefix}__simple-prompt")
            assert denied_prompt.value.error.code == INVALID_PARAMS

            updates = []

            async def on_progress(progress, total, message):
                updates.append((progress, total))

            done = await through.call_tool("trigger-long-running-operation", {"duration": 1, "steps": 3},
                                           progress_callback=on_progress)  # fmt: skip
            assert "Long running operation completed" in done.content[0].text
            assert updates == [(1, 3), (2, 3), (3, 3)]

            data = "data:text/plain;base64," + base64.b64encode(b"a note to zip").decode()
            zipped = await through.call_tool(
                "gzip-file-as-resource", {"name": "note.txt.gz", "data": data, "outputType": "resourceLink"}
            )
            link = zipped.content[0].uri  # a session resource: the server says its resource list changed
            for _ in range(100):
                if any(isinstance(n, ResourceListChangedNotification) for n in notices):
                    break
                await asyncio.sleep(0.1)
            assert any(isinstance(n, ResourceListChangedNotification) for n in notices)
            assert link in [r.uri for r in (await through.list_resources()).resources]
            assert (await through.read_resource(link)).contents[0].mime_type == "application/gzip"

    asyncio.run(scenario())


async def wait_for(condition, seconds: float = 15) -> None:
    for _ in range(int(seconds * 10)):
        if condition():
            return
        await asyncio.sleep(0.1)
    assert condition()


def updated(notices: list) -> list[str]:
    return [str(n.params.uri) for n in notices if isinstance(n, ResourceUpdatedNotification)]


# The SDK warns that 2026-07-28 sessions subscribe with subscriptions/listen; these sessions speak 2025-11-25.
@pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")
def test_resource_subscriptions_are_relayed_to_server_everything_and_its_updates_reach_only_the_subscribers(toolhub):
    base, key, other_key, _ = toolhub
    make_policy(Tool.objects.get(name="toggle-subscriber-updates"))  # starts the server's updates (every 5 s)

    async def scenario():
        first_notices, second_notices, stranger_notices = [], [], []
        async with (
            session_for(base, key, first_notices) as first,
            session_for(base, other_key, second_notices) as second,
            session_for(base, other_key, stranger_notices) as stranger,
        ):
            watched, unwatched = [r.uri for r in (await first.list_resources()).resources][:2]
            await first.subscribe_resource(watched)
            await second.subscribe_resource(watched)
            await stranger.list_resources()  # a session that subscribed to nothing
            started = await first.call_tool("toggle-subscriber-updates", {})
            assert "Started simulated resource updated notifications" in started.content[0].text

            await wait_for(lambda: watched in updated(first_notices) and watched in updated(second_notices))
            await first.unsubscribe_resource(watched)  # the second still wants it: the server keeps sending
            heard_by_first = len(updated(first_notices))
            before = len(updated(second_notices))
            await wait_for(lambda: len(updated(second_notices)) > before)  # the next round, 5 s later
            assert len(updated(first_notices)) == heard_by_first
            assert set(updated(first_notices) + updated(second_notices)) == {watched}  # nobody asked for another
            assert unwatched != watched and updated(stranger_notices) == []

            with pytest.raises(MCPError) as unknown:
                await first.subscribe_resource("demo://resource/nowhere/1")
            assert unknown.value.error.code == INVALID_PARAMS and "There is no resource" in unknown.value.error.message
            await first.unsubscribe_resource("demo://resource/nowhere/1")  # nothing to undo: succeeds

    asyncio.run(scenario())
