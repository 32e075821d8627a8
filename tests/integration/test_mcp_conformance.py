"""The official MCP conformance suite (@modelcontextprotocol/conformance) against a live toolhub on Daphne.

Installed by `make test-servers`, which `make test` runs
(tests/conformance/package-lock.json pins the suite and the Node 22 it needs,
the npm registry's `node` package).
The suite's scenarios call the tools, resources and prompts of its own fixture
server (tests/conformance/everything-server.ts, the suite's reference server,
run with tsx), so that server is imported into toolhub as an MCP server over
streamable HTTP and every such scenario goes through toolhub's gateway path:
policy, naming, content passthrough, resources, prompts, subscriptions,
progress, logging, elicitation and sampling relays. The suite connects without credentials; a
preload (tests/conformance/bearer.mjs) sends toolhub's API key with each of its
requests, as any MCP client configured with a key does.

The server scenarios come from the suite's 0.2.0-alpha.12 (installed as
`conformance-2025-11-25`), run for the 2025-11-25 revision (every scenario of it,
pending ones included): the first release whose server-sse-polling sends the
protocol version it tests (conformance PR #366; 0.1.16 sent 2025-03-26, to which
a server rightly sends no priming event). Its newer scenarios are for the
2026-07-28 draft, which toolhub does not offer. The client scenarios stay on
0.1.16 (tests/integration/test_mcp_conformance_client.py).

Every scenario must pass, except the ones listed in EXPECTED_NOT_PASSING with
the reason; one of those that passes is a failure too (the list is stale).
"""

import asyncio
import json
import os
import re
import subprocess
from pathlib import Path

import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from agents.access.api_keys import create_api_key
from catalog.mcp_client import client as mcp_client
from catalog.mcp_client.sync import sync_server
from catalog.models import McpServer, Tool
from tests.support.builders import make_policy, make_user
from tests.support.conformance import Listed, assert_as_listed
from tests.support.servers import ROOT, daphne, database_env, free_port, start, wait_for_port

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

CONFORMANCE = ROOT / "tests/conformance"
NODE = CONFORMANCE / "node_modules/.bin/node"  # Node 22, from the npm registry's `node` package
SUITE = CONFORMANCE / "node_modules/conformance-2025-11-25/dist/index.js"
REVISION = ("--spec-version", "2025-11-25")
TSX = CONFORMANCE / "node_modules/tsx/dist/cli.mjs"

# The scenarios that do not pass through toolhub: scenario -> ({check id: its status}, why). Any other check that
# fails or warns fails the test, and so does one of these that passes (the list is stale then).
EXPECTED_NOT_PASSING: Listed = {}
RESULT_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$")


def scenario_results(output: Path) -> dict[str, list[dict]]:
    """scenario -> its checks, from the suite's result directories (server-<scenario>-<timestamp>/checks.json)."""
    results = {}
    for directory in output.iterdir():
        match = RESULT_DIR.match(directory.name)
        assert match, directory.name
        results[match["scenario"]] = json.loads((directory / "checks.json").read_text())
    return results


def server_scenarios() -> list[str]:
    listed = subprocess.run(
        [str(NODE), str(SUITE), "list", "--server", *REVISION], capture_output=True, text=True, check=True
    )
    return re.findall(r"^\s+- (\S+)", listed.stdout, flags=re.MULTILINE)


@pytest.fixture
def fixture_server():
    """The suite's reference server on its own port (streamable HTTP at /mcp)."""
    assert SUITE.exists() and NODE.exists(), "the suite is not installed: run `make test-servers` (make test does)"
    port = free_port()
    process, log = start([str(NODE), str(TSX), str(CONFORMANCE / "everything-server.ts")],
                         os.environ | {"PORT": str(port)})  # fmt: skip
    try:
        wait_for_port(port, process, log)
        yield f"http://localhost:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


@pytest.fixture
def toolhub(fixture_server):
    """Daphne on the test database with the fixture server imported, each of its tools policied, and a key."""
    server = McpServer.objects.create(name="conformance", transport="streamable_http", url=fixture_server)
    synced = sync_server(server)
    assert synced.ok, synced.error
    tools = Tool.objects.filter(name__in=McpServer.objects.get(pk=server.pk).tool_names)
    for tool in tools:
        make_policy(tool)
    # Listed to every session, as an operator sets for clients that do not search (the suite looks tools up by name
    # in tools/list); a tool with a policy is callable by name either way.
    tools.update(always_load=True)
    mcp_client.close_all()  # Daphne opens its own connections
    _, key = create_api_key(user=make_user(role="operator"), name="conformance")
    with daphne(database_env()) as base:
        yield base, key


def advertised_capabilities(base: str, key: str) -> dict:
    async def initialize():
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60)
        async with http, streamable_http_client(f"{base}/mcp", http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                result = await session.initialize()
                return result.capabilities.model_dump(mode="json", by_alias=True, exclude_none=True)

    return asyncio.run(initialize())


def test_the_official_conformance_suite_passes_through_toolhub(toolhub, tmp_path):
    base, key = toolhub
    capabilities = advertised_capabilities(base, key)
    assert {"tools", "resources", "prompts", "logging", "completions"} <= set(capabilities), capabilities
    assert capabilities["resources"].get("subscribe") is True, capabilities

    output = tmp_path / "results"
    # localhost, not 127.0.0.1: the dns-rebinding scenario needs a localhost URL (it sends its own Host headers).
    url = base.replace("127.0.0.1", "localhost") + "/mcp"
    env = os.environ | {"TOOLHUB_CONFORMANCE_TOKEN": key, "TOOLHUB_CONFORMANCE_URL": url}
    run = subprocess.run(
        [str(NODE), "--import", str(CONFORMANCE / "bearer.mjs"), str(SUITE), "server", "--suite", "all", *REVISION,
         "--url", url, "-o", str(output)],
        cwd=CONFORMANCE, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    results = scenario_results(output)

    assert set(results) == set(server_scenarios()), (run.stdout[-3000:], run.stderr[-3000:])
    assert_as_listed(results, EXPECTED_NOT_PASSING, "server")
