"""A real Prometheus (Debian's) scraping a running toolhub with the bearer token: a turn served through /v1 shows in
Prometheus's own query API as toolhub_turns_total{outcome="done"} one higher, the shipped alert rules evaluate
against the scraped series, and promtool accepts deploy/prometheus/'s configuration and rules."""

import json
import urllib.request

import pytest
import yaml

from agents.access.api_keys import create_api_key
from demo.catalog import load_demo_catalog
from tests.support.builders import make_user
from tests.support.prometheus import PROMTOOL, prometheus_server, promtool
from tests.support.servers import ROOT, celery_worker, daphne, database_env
from toolhub.celery import app

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
TOKEN = "scrape-token-for-prometheus"
DEPLOYED = ROOT / "deploy" / "prometheus"
TURNS_DONE = 'toolhub_turns_total{job="toolhub", outcome="done"}'


def shipped_rules() -> int:
    return sum(len(group["rules"]) for group in yaml.safe_load((DEPLOYED / "alerts.yml").read_text())["groups"])


def test_prometheus_counts_the_turn_a_real_request_ended():
    load_demo_catalog()
    _, key = create_api_key(user=make_user(), name="scraped")
    env = database_env(TOOLHUB_METRICS_TOKEN=TOKEN)
    with (
        celery_worker(env, app),
        daphne(env) as base,
        prometheus_server(base, TOKEN, rule_files=[DEPLOYED / "alerts.yml"]) as prometheus,
    ):
        assert prometheus.wait_for('up{job="toolhub"}', lambda up: up == 1) == 1
        before = prometheus.wait_for(TURNS_DONE, lambda value: value is not None)

        body = json.dumps({"model": "toolhub", "messages": [{"role": "user", "content": "what is 12 * 7?"}]})
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        request = urllib.request.Request(f"{base}/v1/chat/completions", data=body.encode(), headers=headers)
        with urllib.request.urlopen(request, timeout=120) as response:
            assert "84" in json.load(response)["choices"][0]["message"]["content"]

        assert prometheus.wait_for(TURNS_DONE, lambda value: value == before + 1) == before + 1
        rules = prometheus.rules_evaluated()

    assert len(rules) == shipped_rules()
    assert {rule["health"] for rule in rules} == {"ok"}, [rule.get("lastError") for rule in rules]
    assert next(rule for rule in rules if rule["name"] == "ToolhubDown")["state"] == "inactive"


def test_promtool_accepts_the_shipped_configuration_and_rules(tmp_path):
    assert PROMTOOL.exists(), f"{PROMTOOL} is missing: `make test-integration` installs Debian's prometheus"
    # The configuration reads the token from a file that promtool requires to exist: the same file elsewhere.
    token = tmp_path / "toolhub_metrics_token"
    token.write_text(TOKEN)
    config = (DEPLOYED / "prometheus.yml").read_text()
    assert config.count("/etc/prometheus/toolhub_metrics_token") == 1
    (tmp_path / "prometheus.yml").write_text(config.replace("/etc/prometheus/toolhub_metrics_token", str(token)))
    (tmp_path / "alerts.yml").write_text((DEPLOYED / "alerts.yml").read_text())

    checked = promtool("check", "config", "--lint=all", str(tmp_path / "prometheus.yml"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {shipped_rules()} rules found" in checked.stdout  # rule_files: alerts.yml beside it

    checked = promtool("check", "rules", "--lint=all", str(DEPLOYED / "alerts.yml"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
