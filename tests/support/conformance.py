"""What the official MCP conformance suite's results must show: every scenario passes, except those a test lists
with the checks that do not pass and why; one of those that passes fails the test too (its list is stale then).
Shared by the server scenarios (tests/integration/test_mcp_conformance.py) and the client scenarios
(tests/integration/test_mcp_conformance_client.py)."""

import json

NOT_PASSING = ("FAILURE", "WARNING")
Listed = dict[str, tuple[dict[str, str], str]]  # scenario -> (its checks that do not pass: status, why)


def not_passing(checks: list[dict]) -> dict[str, str]:
    """check id -> status of the checks that failed or warned."""
    return {check["id"]: check["status"] for check in checks if check["status"] in NOT_PASSING}


def assert_as_listed(results: dict[str, list[dict]], expected: Listed, kind: str) -> None:
    """`results` (scenario -> its checks) hold no check that fails or warns outside `expected` (scenario -> (its
    checks that do not pass, why)), each listed scenario fails exactly as listed, and every other one passed a check.
    Prints how many passed."""
    assert set(expected) <= set(results), sorted(set(expected) - set(results))
    unexpected = {
        scenario: [(c["id"], c["status"], c.get("errorMessage")) for c in checks if c["status"] in NOT_PASSING]
        or "no check passed"
        for scenario, checks in results.items()
        if scenario not in expected and (not_passing(checks) or not any(c["status"] == "SUCCESS" for c in checks))
    }
    assert not unexpected, json.dumps(unexpected, indent=1)
    for scenario, (statuses, reason) in expected.items():
        assert not_passing(results[scenario]) == statuses, (scenario, reason, results[scenario])
    passed = sorted(set(results) - set(expected))
    print(f"{len(passed)} of {len(results)} conformance {kind} scenarios passed: {', '.join(passed)}")
