"""The official MCP conformance suite's client scenarios against toolhub's upstream MCP client.

For each client scenario the suite starts its own MCP server (and, for the auth scenarios, its own authorization
server: metadata discovery variants, dynamic and pre-registered clients, token endpoint auth methods, scopes,
resource mismatch, client credentials) and runs tests/conformance/toolhub_client.py against it, which connects
with catalog.mcp_client.client, signs in with catalog.mcp_oauth when the server answers 401, lists the tools and
calls them. The scenarios run one at a time: each starts a Python process, and two shared cores starting twenty of
them at once would time out.

Every scenario must pass, except the ones listed in EXPECTED_NOT_PASSING with the reason; one of those that passes
is a failure too (the list is stale).
"""

import json
import os
import re
import subprocess
import sys

import pytest

from tests.support.conformance import assert_as_listed
from tests.support.servers import ROOT

pytestmark = pytest.mark.integration

CONFORMANCE = ROOT / "tests/conformance"
NODE = CONFORMANCE / "node_modules/.bin/node"
SUITE = CONFORMANCE / "node_modules/@modelcontextprotocol/conformance/dist/index.js"
CLIENT = f"{sys.executable} {CONFORMANCE / 'toolhub_client.py'}"

EXPECTED_NOT_PASSING = {
    "auth/basic-cimd": (
        {"cimd-client-id-used": "WARNING"},
        "a client ID metadata document needs a public https URL for toolhub's client metadata; toolhub registers "
        "with dynamic client registration instead (a SHOULD)",
    ),
    "auth/2025-03-26-oauth-metadata-backcompat": (
        {"client-registration": "FAILURE", "authorization-request": "FAILURE", "token-request": "FAILURE"},
        "the scenario's metadata at the server's root names the issuer <origin>/oauth; toolhub checks the issuer "
        "against the URL the metadata was fetched for (RFC 8414 3.3, SEP-2468, as the MCP SDK's client does) and "
        "refuses it",
    ),
    "auth/client-credentials-jwt": (
        {"client-credentials-grant-type": "FAILURE", "client-credentials-jwt-verified": "FAILURE"},
        "client credentials with private_key_jwt (RFC 7523) are not offered: toolhub's client credentials use a "
        "client secret",
    ),
    "auth/cross-app-access-complete-flow": (
        {"complete-flow-token-exchange": "FAILURE", "complete-flow-jwt-bearer": "FAILURE"},
        "enterprise-managed authorization (SEP-990: token exchange for an ID-JAG, then the JWT bearer grant) is not "
        "offered",
    ),
}


def client_scenarios() -> list[str]:
    listed = subprocess.run([str(NODE), str(SUITE), "list", "--client"], capture_output=True, text=True, check=True)
    return re.findall(r"^\s+- (\S+)", listed.stdout, flags=re.MULTILINE)


def run_scenario(scenario: str, output) -> list[dict]:
    run = subprocess.run(
        [str(NODE), str(SUITE), "client", "--command", CLIENT, "--scenario", scenario, "--timeout", "60000",
         "-o", str(output)],
        cwd=CONFORMANCE, env=os.environ | {"PYTHONUNBUFFERED": "1"}, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    found = list(output.rglob("checks.json"))
    assert len(found) == 1, (scenario, run.stdout[-3000:], run.stderr[-3000:])
    return json.loads(found[0].read_text())


def test_the_conformance_client_scenarios_pass_with_toolhubs_upstream_client(tmp_path):
    assert SUITE.exists() and NODE.exists(), "the suite is not installed: run `make test-servers` (make test does)"
    scenarios = client_scenarios()
    assert set(EXPECTED_NOT_PASSING) <= set(scenarios)
    results = {scenario: run_scenario(scenario, tmp_path / str(index)) for index, scenario in enumerate(scenarios)}

    assert_as_listed(results, EXPECTED_NOT_PASSING, "client")
