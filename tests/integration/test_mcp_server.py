"""toolhub's /mcp through a real Daphne, driven by the official MCP SDK client; MCP tools run on the demo server."""

import asyncio
import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from contextlib import asynccontextmanager

import httpx2
import pytest
from mcp import ClientSession, MCPError
from mcp.client.streamable_http import streamable_http_client

from agents.access.api_keys import create_api_key
from catalog.mcp_client import client as mcp_client
from catalog.models import McpServer
from catalog.tasks import sync_mcp_server
from demo.catalog import load_demo_catalog
from tests.support.builders import make_user
from tests.support.mcp_asgi import sse_events
from tests.support.servers import ROOT, daphne, database_env

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def serving(tmp_path, *server_options: str):
    """Daphne serving toolhub on the test database: the demo catalog, the demo Loyalty server synced (with
    `server_options`), an API key."""
    load_demo_catalog()
    server = McpServer.objects.create(
        name="loyalty",
        command=sys.executable,
        args=["-m", "demo.loyalty_mcp.server", "--db", str(tmp_path / "loyalty.sqlite3"), *server_options],
    )
    assert sync_mcp_server(server.pk).endswith("unchanged")
    mcp_client.close_all()  # Daphne starts its own connection to the demo server
    _, key = create_api_key(user=make_user(role="operator"), name="mcp-itest")
    with daphne(database_env()) as base:
        yield base, key


@pytest.fixture
def toolhub_mcp(tmp_path):
    yield from serving(tmp_path)


@pytest.fixture
def slow_toolhub_mcp(tmp_path):
    """As toolhub_mcp, with the demo server's list_campaigns answering after 2 s."""
    yield from serving(tmp_path, "--test-delay-tool", "list_campaigns=2")


@asynccontextmanager
async def mcp_session(base: str, key: str, notifications: list | None = None):
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=120)

    async def on_message(message):
        if notifications is not None:
            notifications.append(message)

    async with http, streamable_http_client(f"{base}/mcp", http_client=http) as (read, write):
        async with ClientSession(read, write, message_handler=on_message) as session:
            await session.initialize()
            yield session


async def names(session) -> list[str]:
    return [tool.name for tool in (await session.list_tools()).tools]


def answer(result) -> dict:
    return json.loads(result.content[0].text)


def post(url: str, headers: dict, message: dict | None = None) -> tuple[int, dict]:
    body = json.dumps(message or {"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
    request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json",
                                     "Accept": "application/json, text/event-stream", **headers})  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()
            return response.status, dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers)


def post_status(url: str, headers: dict) -> int:
    return post(url, headers)[0]


def test_mcp_needs_a_valid_api_key(toolhub_mcp):
    base, key = toolhub_mcp

    assert post_status(f"{base}/mcp", {}) == 401
    assert post_status(f"{base}/mcp", {"Authorization": "Bearer th_nope_nope"}) == 401
    assert post_status(f"{base}/mcp", {"Authorization": f"Bearer {key}"}) != 401

    client = {"name": "itest", "version": "1"}
    params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client}
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
    status, headers = post(f"{base}/mcp", {"Authorization": f"Bearer {key}"}, initialize)
    session = {k.lower(): v for k, v in headers.items()}["mcp-session-id"]
    assert status == 200 and session
    _, other_key = create_api_key(user=make_user(username="other", role="operator"), name="other")
    assert post_status(f"{base}/mcp", {"Authorization": f"Bearer {other_key}", "Mcp-Session-Id": session}) == 404
    assert post_status(f"{base}/mcp", {"Authorization": f"Bearer {key}", "Mcp-Session-Id": session}) == 200

    statuses = []

    async def record(response):
        statuses.append(response.status_code)

    async def connect_without_key():
        async with httpx2.AsyncClient(timeout=30, event_hooks={"response": [record]}) as http:
            async with streamable_http_client(f"{base}/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await asyncio.wait_for(session.initialize(), 30)

    with pytest.raises(Exception, match="error"):  # the SDK client cannot initialize
        asyncio.run(connect_without_key())
    assert statuses == [401]


def test_sdk_client_lists_searches_loads_and_calls_tools_but_never_a_denied_one(toolhub_mcp):
    base, key = toolhub_mcp
    _, other_key = create_api_key(user=make_user(username="other", role="viewer"), name="other")

    async def scenario():
        notifications = []
        async with mcp_session(base, key, notifications) as session:
            listed = await names(session)
            assert {"tool_search", "calculate"} <= set(listed)
            assert "list_campaigns" not in listed  # an MCP tool: deferred until found
            assert "purge_container_images" not in listed  # no policy

            calculated = await session.call_tool("calculate", {"expression": "6 * 7"})
            assert not calculated.is_error and answer(calculated)["result"] == 42

            early = await session.call_tool("list_campaigns", {"page_size": 1})  # permitted: callable unlisted
            assert not early.is_error and len(answer(early)["items"]) == 1

            found = await session.call_tool("tool_search", {"query": "list loyalty campaigns"})
            assert "list_campaigns" in answer(found)["found"]
            assert any(type(n).__name__ == "ToolListChangedNotification" for n in notifications)
            assert "list_campaigns" in await names(session)

            campaigns = await session.call_tool("list_campaigns", {})  # runs on the demo Loyalty MCP server
            assert not campaigns.is_error, campaigns.content[0].text
            assert any(item["campaign_id"] == "cmp_bday0001" for item in answer(campaigns)["items"])

            invalid = await session.call_tool("list_campaigns", {"page_size": "many"})
            assert invalid.is_error and "Invalid arguments" in answer(invalid)["error"]

            found = await session.call_tool("tool_search", {"query": "purge unused docker images"})
            assert "purge_container_images" not in answer(found)["found"]
            assert "purge_container_images" not in await names(session)
            with pytest.raises(MCPError, match="no policy \\(fail closed\\)"):  # denied: a JSON-RPC error
                await session.call_tool("purge_container_images", {})

        async with mcp_session(base, key) as again:  # what the key found stays for its next sessions
            assert "list_campaigns" in await names(again)
        async with mcp_session(base, other_key) as other:  # another key starts from the always-loaded tools
            assert "list_campaigns" not in await names(other)

    asyncio.run(scenario())


def test_a_viewers_key_lists_tools_but_the_sdk_client_gets_an_error_for_a_call(toolhub_mcp):
    base, _ = toolhub_mcp
    _, viewer_key = create_api_key(user=make_user(username="watcher", role="viewer"), name="viewer")

    async def scenario():
        async with mcp_session(base, viewer_key) as session:
            assert "calculate" in await names(session)
            with pytest.raises(MCPError, match="may not call a tool"):
                await session.call_tool("calculate", {"expression": "6 * 7"})

    asyncio.run(scenario())


def test_the_readme_mcp_client_example_works_as_printed(toolhub_mcp):
    base, key = toolhub_mcp
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "mcp.md").read_text(), flags=re.S)
    (example,) = [block for block in blocks if "streamable_http_client(" in block and "TOOLHUB_KEY" in block]

    code = example.replace("http://127.0.0.1:8000", base)
    env = os.environ | {"TOOLHUB_KEY": key}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)

    assert result.returncode == 0, result.stderr
    listed, found, campaigns = result.stdout.splitlines()[:3]
    assert "'tool_search'" in listed and "'list_campaigns'" not in listed
    assert "list_campaigns" in json.loads(found)["found"]
    assert len(json.loads(campaigns)["items"]) == 2


def test_a_stream_dropped_mid_call_is_resumed_with_last_event_id_and_gets_the_answer(slow_toolhub_mcp):
    """A 2025-11-25 client whose POST stream drops while the tool runs reconnects with GET and Last-Event-ID on the
    same session and is sent the answer (the call ran on)."""
    base, key = slow_toolhub_mcp
    headers = {"Authorization": f"Bearer {key}", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2025-11-25"}  # fmt: skip
    hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "itest", "version": "1"}}
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "list_campaigns", "arguments": {}}}
    with httpx2.Client(base_url=base, headers=headers, timeout=30) as http:
        opened = http.post("/mcp", json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello})
        http.headers["Mcp-Session-Id"] = opened.headers["mcp-session-id"]
        assert http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}).status_code == 202
        with http.stream("POST", "/mcp", json=call) as response:
            priming = next(sse_events(response.iter_lines()))
        # The connection is closed here, two seconds before the tool answers.
        assert priming["data"] == "" and priming["id"] and priming["retry"] == "1000"
        resumed = {"Accept": "text/event-stream", "Last-Event-ID": priming["id"]}
        with http.stream("GET", "/mcp", headers=resumed) as replay:
            sent = (json.loads(event["data"]) for event in sse_events(replay.iter_lines()) if event.get("data"))
            answered = next(message for message in sent if message.get("id") == 1)

    campaigns = json.loads(answered["result"]["content"][0]["text"])
    assert not answered["result"].get("isError") and campaigns["items"], campaigns
