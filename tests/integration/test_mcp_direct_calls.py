"""Direct calls through toolhub's /mcp on Daphne, decided by policy and approval, not by the router's reading.

`@modelcontextprotocol/server-everything` (npm, tests/npm) is imported; the SDK client calls its tools by name
without a tool_search first: one whose policy is a create with no domain runs at once (the router would read the
bare call as "answer"), one whose policy requires confirmation waits until an operator approves it.
"""

import asyncio
import json
import time
from contextlib import asynccontextmanager

import httpx2
import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from agents.access.api_keys import create_api_key
from agents.models import Message, ToolApproval
from agents.turns.approvals import decide_approval
from catalog.mcp_client import client as mcp_client
from catalog.mcp_client.sync import sync_server
from catalog.models import McpServer, Tool
from tests.support.builders import make_policy, make_user
from tests.support.servers import ROOT, daphne, database_env

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

EVERYTHING = ROOT / "tests/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"


@pytest.fixture
def toolhub():
    """Daphne on the test database with server-everything synced: echo a create without domains, get-sum a high-risk
    delete that requires confirmation (both deferred, as imported tools are), an operator's key."""
    assert EVERYTHING.exists(), "server-everything is not installed: run `make test-servers` (make test does)"
    server = McpServer.objects.create(name="everything", command="node", args=[str(EVERYTHING), "stdio"])
    synced = sync_server(server)
    assert synced.ok, synced.error
    make_policy(Tool.objects.get(name="echo"), operation="create", domains=())
    make_policy(Tool.objects.get(name="get-sum"), operation="delete", risk="high", requires_confirmation=True)
    mcp_client.close_all()  # Daphne opens its own connections
    _, key = create_api_key(user=make_user(role="operator"), name="direct")
    with daphne(database_env()) as base:
        yield base, key


@asynccontextmanager
async def session_for(base: str, key: str):
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=120)
    async with http, streamable_http_client(f"{base}/mcp", http_client=http) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield session


def approve_when_asked(reviewer, seconds: float = 30) -> ToolApproval:
    """Approve the first approval asked for (on a thread of its own: its connection is closed after)."""
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            approval = ToolApproval.objects.filter(status=ToolApproval.Status.PENDING).first()
            if approval is not None:
                return decide_approval(approval_id=approval.pk, user=reviewer, approve=True)
            time.sleep(0.1)
        raise AssertionError("no approval was asked for")
    finally:
        connection.close()


def test_a_direct_write_call_runs_under_policy_and_a_risky_one_after_approval(toolhub):
    base, key = toolhub
    reviewer = make_user(username="reviewer", role="admin")

    async def scenario():
        async with session_for(base, key) as session:
            listed = {tool.name for tool in (await session.list_tools()).tools}
            assert "echo" not in listed and "get-sum" not in listed  # deferred: listing is unchanged

            echoed = await session.call_tool("echo", {"message": "straight through"})  # no tool_search first
            assert not echoed.is_error and "straight through" in echoed.content[0].text

            calling = asyncio.ensure_future(session.call_tool("get-sum", {"a": 2, "b": 40}))
            approval = await sync_to_async(approve_when_asked, thread_sensitive=False)(reviewer)
            assert approval.tool_name == "get-sum" and approval.status == ToolApproval.Status.APPROVED
            summed = await asyncio.wait_for(calling, timeout=60)
            assert not summed.is_error and "42" in summed.content[0].text
            return approval

    approval = asyncio.run(scenario())
    answer = Message.objects.get(turn_id=approval.turn_id, role=Message.Role.TOOL)
    assert "42" in json.dumps(answer.result)
