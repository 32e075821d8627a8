"""/metrics from two Daphnes on one database: a turn served by one is counted alike by both (the figures are read
from the database, never from a process's memory), so scraping through the balancer or per process agrees."""

import json
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.servers import daphne, embedded_env, manage

pytestmark = pytest.mark.integration
TOKEN = "scrape-token-for-the-test"


def figures(base: str) -> dict:
    request = urllib.request.Request(f"{base}/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_two_processes_report_the_turn_one_of_them_served(tmp_path):
    env = embedded_env(tmp_path) | {"TOOLHUB_METRICS_TOKEN": TOKEN}
    manage(env, "setup_demo")
    key = manage(env, "create_api_key", "itest").strip().splitlines()[-1]
    with daphne(env) as first, daphne(env) as second:
        before = figures(second)
        body = json.dumps({"model": "toolhub", "messages": [{"role": "user", "content": "what is 12 * 7?"}]})
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        request = urllib.request.Request(f"{first}/v1/chat/completions", data=body.encode(), headers=headers)
        with urllib.request.urlopen(request, timeout=120) as response:
            assert "84" in json.load(response)["choices"][0]["message"]["content"]
        seen_by_first, seen_by_second = figures(first), figures(second)

    done = ("toolhub_turns_total", (("outcome", "done"),))
    assert seen_by_first == seen_by_second
    assert seen_by_second[done] == before[done] + 1
    assert seen_by_second[("toolhub_routing_requests_total", ())] == before[("toolhub_routing_requests_total", ())] + 1
    assert (
        seen_by_second[("toolhub_turn_duration_seconds_count", ())]
        == before[("toolhub_turn_duration_seconds_count", ())] + 1
    )
